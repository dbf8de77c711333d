#include "common/file_io.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ftw.h>

namespace gpusim {

std::string errno_text(int err) { return std::strerror(err); }

ReadResult read_file(const std::string& path) {
  ReadResult r;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    r.error = {path + ": " + errno_text(e), e == ENOENT};
    return r;
  }
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      r.data.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      r.error = {path + ": " + errno_text(errno), false};
      break;
    }
  }
  ::close(fd);
  return r;
}

static Status write_all(int fd, const std::string& data, const std::string& path) {
  std::size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{path + ": " + errno_text(errno)};
    }
    off += static_cast<std::size_t>(n);
  }
  return ok_status();
}

// A new name beside `path` for a file being made. Dot-prefixed so that directory scans for
// "*.json" never pick up a half-written file.
static std::string temporary_beside(const std::string& path) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "/." + base + ".tmp." + random_hex(6);
}

Status write_file_atomic(const std::string& path, const std::string& data, unsigned mode) {
  std::string tmp = temporary_beside(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Error{tmp + ": " + errno_text(errno)};
  Status st = write_all(fd, data, tmp);
  if (st.ok() && ::fchmod(fd, mode) != 0) st = Error{tmp + ": chmod: " + errno_text(errno)};
  if (::close(fd) != 0 && st.ok()) st = Error{tmp + ": close: " + errno_text(errno)};
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    st = Error{path + ": rename: " + errno_text(errno)};
  }
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

Result<int> open_or_create_shared(const std::string& path, unsigned mode) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd >= 0) return fd;
  if (errno != ENOENT) return Error{path + ": " + errno_text(errno)};
  std::string tmp = temporary_beside(path);
  fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Error{tmp + ": " + errno_text(errno)};
  std::string failed;
  if (::fchmod(fd, mode) != 0) failed = tmp + ": chmod: " + errno_text(errno);
  ::close(fd);
  // link, not rename: a file another program made meanwhile (and may hold a lock on) stays.
  if (failed.empty() && ::link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST) {
    failed = path + ": link: " + errno_text(errno);
  }
  ::unlink(tmp.c_str());
  if (!failed.empty()) return Error{failed};
  fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Error{path + ": " + errno_text(errno)};
  return fd;
}

Status make_dir(const std::string& path, unsigned mode) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) {
    return Error{path + ": mkdir: " + errno_text(errno)};
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error{path + ": " + errno_text(errno)};
  if (!S_ISDIR(st.st_mode)) return Error{path + ": exists and is not a directory"};
  if (::chmod(path.c_str(), mode) != 0) return Error{path + ": chmod: " + errno_text(errno)};
  return ok_status();
}

Status make_dir_if_missing(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return Error{path + ": mkdir: " + errno_text(errno)};
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Error{path + ": " + errno_text(errno)};
  if (!S_ISDIR(st.st_mode)) return Error{path + ": exists and is not a directory"};
  return ok_status();
}

Status touch_file(const std::string& path, unsigned mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) return Error{path + ": " + errno_text(errno)};
  Status st = ok_status();
  if (::fchmod(fd, mode) != 0) st = Error{path + ": chmod: " + errno_text(errno)};
  ::close(fd);
  return st;
}

Status make_device_file(const std::string& path, unsigned mode) {
  if (::geteuid() == 0 && ::mknod(path.c_str(), S_IFCHR | mode, makedev(1, 3)) == 0) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0 && ::chmod(path.c_str(), mode) == 0) {
      ::close(fd);
      return ok_status();
    }
    if (fd >= 0) ::close(fd);
    ::unlink(path.c_str());  // a nodev mount: the node exists but cannot be opened
  }
  return touch_file(path, mode);
}

static int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return ::remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

Status remove_tree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return ok_status();
    return Error{path + ": " + errno_text(errno)};
  }
  if (::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
    return Error{path + ": cannot remove: " + errno_text(errno)};
  }
  return ok_status();
}

OwnedFd& OwnedFd::operator=(OwnedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

OwnedFd::~OwnedFd() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::vector<DirEntry>> list_dir_entries(const std::string& path) {
  std::vector<DirEntry> entries;
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return entries;
    return Error{path + ": " + errno_text(errno)};
  }
  while (struct dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
    entries.push_back({e->d_name, static_cast<unsigned long long>(e->d_ino)});
  }
  ::closedir(d);
  return entries;
}

Result<std::vector<std::string>> list_dir(const std::string& path) {
  auto entries = list_dir_entries(path);
  if (!entries.ok()) return Error{entries.error().message};
  std::vector<std::string> names;
  names.reserve(entries->size());
  for (DirEntry& e : *entries) names.push_back(std::move(e.name));
  return names;
}

std::string random_hex(unsigned bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  unsigned char buf[64];
  if (bytes > sizeof buf) bytes = sizeof buf;
  std::size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::getrandom(buf + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      // No entropy source: fall back to something unique enough for file names.
      unsigned long long x = static_cast<unsigned long long>(::getpid()) * 2654435761ULL ^
                             static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(&out));
      for (; got < bytes; ++got, x >>= 8) buf[got] = static_cast<unsigned char>(x);
      break;
    }
    got += static_cast<std::size_t>(n);
  }
  for (unsigned i = 0; i < bytes; ++i) {
    out.push_back(kHex[buf[i] >> 4]);
    out.push_back(kHex[buf[i] & 15]);
  }
  return out;
}

}  // namespace gpusim
