#include "proc/proc_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include <dirent.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

namespace gpureap::procfs {
unique_fd& unique_fd::operator=(unique_fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

unique_fd::~unique_fd() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// Why open(2) of an output file failed, for a person.
std::string output_open_failure(int err) {
  return err == ENXIO ? std::string("not a regular file")
         : err == ELOOP ? std::string("a symbolic link (never followed)")
                        : std::string(std::strerror(err));
}

// "" when the opened output file may be written; else why not.
std::string output_file_refusal(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::strerror(errno);
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_nlink != 1) {
    return "it has " + std::to_string(st.st_nlink) + " hard links (it could be another file under a second name)";
  }
  if (st.st_uid != ::geteuid()) {
    return "it belongs to uid " + std::to_string(st.st_uid) + ", not to the user gpureap runs as";
  }
  return {};
}

// O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader, for ever.
constexpr int kOutputFlags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;

}  // namespace

unique_fd open_output_file(const std::string& path, OutputMode mode, std::string& why) {
  unique_fd fd(::open(path.c_str(), kOutputFlags | O_CREAT | (mode == OutputMode::Append ? O_APPEND : 0), 0600));
  if (!fd) {
    why = output_open_failure(errno);
    return unique_fd();
  }
  if (why = output_file_refusal(fd.get()); !why.empty()) return unique_fd();
  if (mode == OutputMode::Truncate && ::ftruncate(fd.get(), 0) != 0) {
    why = std::strerror(errno);
    return unique_fd();
  }
  return fd;
}

std::string output_file_problem(const std::string& path) {
  unique_fd fd(::open(path.c_str(), kOutputFlags | O_APPEND));
  if (fd) return output_file_refusal(fd.get());
  if (errno != ENOENT) return output_open_failure(errno);
  // Missing: open(O_CREAT) needs a directory it may write to, reached through the same path.
  const std::size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  unique_fd parent(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!parent) return output_open_failure(errno);
  if (::faccessat(parent.get(), ".", W_OK | X_OK, AT_EACCESS) != 0) return output_open_failure(errno);
  return {};
}

int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (written == 0) return EIO;
    data.remove_prefix(static_cast<std::size_t>(written));
  }
  return 0;
}

unique_fd open_dir_at(int dirfd, const char* name, bool no_follow) {
  int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  if (no_follow) flags |= O_NOFOLLOW;
  int fd;
  do {
    fd = ::openat(dirfd, name, flags);
  } while (fd < 0 && errno == EINTR);
  return unique_fd(fd);
}

bool errno_means_gone() { return errno == ENOENT || errno == ESRCH; }
bool errno_means_denied() { return errno == EACCES || errno == EPERM; }

bool denial_hides_nothing(pid_t pid) { return pid == 1 && ::geteuid() == 0; }

// Buffers are left uninitialised (make_unique_for_overwrite): zeroing them would touch every
// page, a page fault each, though most reads fill a few hundred bytes.
ReadBuffer::ReadBuffer(std::size_t initial_capacity)
    : data_(std::make_unique_for_overwrite<char[]>(initial_capacity)), capacity_(initial_capacity) {}

void ReadBuffer::grow(std::size_t at_least) {
  std::size_t capacity = capacity_;
  while (capacity < at_least) capacity *= 2;
  auto data = std::make_unique_for_overwrite<char[]>(capacity);
  std::memcpy(data.get(), data_.get(), capacity_);
  data_ = std::move(data);
  capacity_ = capacity;
}

std::optional<std::string_view> ReadBuffer::read_file_at(int dirfd, const char* name,
                                                         std::size_t max_size) {
  return read_at(dirfd, name, max_size, false);
}

std::optional<std::string_view> ReadBuffer::read_proc_file_at(int dirfd, const char* name,
                                                              std::size_t max_size) {
  return read_at(dirfd, name, max_size, true);
}

std::optional<std::string_view> ReadBuffer::read_file_until_at(int dirfd, const char* name,
                                                               std::string_view needle,
                                                               std::size_t max_size) {
  return read_at(dirfd, name, max_size, false, needle);
}

std::optional<std::string_view> ReadBuffer::read_at(int dirfd, const char* name,
                                                    std::size_t max_size, bool short_read_is_end,
                                                    std::string_view needle) {
  int fd;
  do {
    fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return std::nullopt;
  const unique_fd owner(fd);
  return read_whole(fd, max_size, short_read_is_end, needle, /*positional=*/false);
}

std::optional<std::string_view> ReadBuffer::read_kept_proc_file(int fd, bool one_piece, std::size_t max_size) {
  return read_whole(fd, max_size, one_piece, {}, /*positional=*/true);
}

// positional: preads from offset 0, where procfs makes a file anew, so that a file kept open
// reads as a fresh open would (read() serves what cannot seek: a pipe, /dev/kmsg).
std::optional<std::string_view> ReadBuffer::read_whole(int fd, std::size_t max_size, bool short_read_is_end,
                                                       std::string_view needle, bool positional) {
  std::size_t size = 0;
  for (;;) {
    if (size == capacity_) {
      if (size >= max_size) break;
      grow(capacity_ * 2);
    }
    const std::size_t want = std::min(capacity_, max_size) - size;
    const ssize_t got = positional ? ::pread(fd, data_.get() + size, want, static_cast<off_t>(size))
                                   : ::read(fd, data_.get() + size, want);
    if (got < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    if (got == 0) break;
    const std::size_t before = size;
    size += static_cast<std::size_t>(got);
    if (size >= max_size) break;
    if (!needle.empty()) {
      // Also where the needle straddles two reads.
      const std::size_t from = before >= needle.size() ? before - needle.size() + 1 : 0;
      if (std::string_view(data_.get() + from, size - from).find(needle) != std::string_view::npos) break;
    }
    if (short_read_is_end && static_cast<std::size_t>(got) < want) break;
  }
  return std::string_view(data_.get(), size);
}

std::optional<std::string_view> ReadBuffer::read_link_at(int dirfd, const char* name) {
  for (;;) {
    const ssize_t got = ::readlinkat(dirfd, name, data_.get(), capacity_);
    if (got < 0) return std::nullopt;
    const auto length = static_cast<std::size_t>(got);
    if (length < capacity_) return std::string_view(data_.get(), length);
    grow(capacity_ * 2);  // possibly truncated: retry with room to spare
  }
}

DirLister::DirLister() : data_(std::make_unique_for_overwrite<char[]>(kBufferSize)) {}

long DirLister::fill(int dirfd) {
  ssize_t got;
  do {
    got = ::getdents64(dirfd, data_.get(), kBufferSize);
  } while (got < 0 && errno == EINTR);
  return static_cast<long>(got);
}

DirEntryView entry_at(const char* record) {
  // struct dirent64 from getdents64 is 8-byte aligned within the buffer.
  const auto* entry = reinterpret_cast<const struct dirent64*>(record);
  return DirEntryView{entry->d_name, entry->d_type, entry->d_reclen};
}

namespace {

bool owned_by_root_or_invoker(const struct stat& info) { return info.st_uid == 0 || info.st_uid == ::getuid(); }

std::string owner_reason(const struct stat& info) {
  return fmt::format("to uid {}, neither root nor the user running gpureap (uid {}): whoever owns it decides what "
                     "root does; chown it",
                     info.st_uid, ::getuid());
}

}  // namespace

std::string untrusted_file_reason(int fd, const std::string& path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) return fmt::format("cannot be checked: {}", std::strerror(errno));
  if (!owned_by_root_or_invoker(info)) return "belongs " + owner_reason(info);
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fmt::format("is writable by group or others (mode {:04o}): anyone who can write it decides what root does; "
                       "chmod go-w it",
                       info.st_mode & 07777);
  }
  // The directory the file really is in (a symlink's target's), through the open file.
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char real[4096];
  const ssize_t length = ::readlink(link, real, sizeof real - 1);
  std::string dir = length > 0 ? std::string(real, static_cast<std::size_t>(length)) : path;
  const auto slash = dir.rfind('/');
  dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
  struct stat dir_info {};
  if (::stat(dir.c_str(), &dir_info) != 0) return fmt::format("is in {}, which cannot be checked: {}", dir, std::strerror(errno));
  if (!owned_by_root_or_invoker(dir_info)) return fmt::format("is in {}, which belongs {}", dir, owner_reason(dir_info));
  if ((dir_info.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (dir_info.st_mode & S_ISVTX) == 0) {
    return fmt::format("is in {}, which is writable by group or others (mode {:04o}) without the sticky bit: anyone "
                       "who can write there can replace it; chmod go-w the directory",
                       dir, dir_info.st_mode & 07777);
  }
  return {};
}

std::optional<std::string> read_bounded_file(const std::string& path, std::size_t max_bytes, std::string_view what,
                                             std::string& error, FileTrust trust) {
  const unique_fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    error = fmt::format("{} {}: cannot open it: {}", what, path, std::strerror(errno));
    return std::nullopt;
  }
  std::string text;
  error.clear();
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    error = fmt::format("{} {} is not a regular file", what, path);
  } else if (static_cast<std::uint64_t>(info.st_size) > max_bytes) {
    error = fmt::format("{} {} is larger than {} bytes", what, path, max_bytes);
  } else if (std::string why = trust == FileTrust::RootOrInvoker ? untrusted_file_reason(fd.get(), path) : "";
             !why.empty()) {
    error = fmt::format("{} {} {}", what, path, why);
  } else {
    char buffer[8192];
    ssize_t n = 0;
    while ((n = ::read(fd.get(), buffer, sizeof(buffer))) > 0 && text.size() <= max_bytes) {
      text.append(buffer, static_cast<std::size_t>(n));
    }
    if (n < 0) error = fmt::format("{} {}: cannot read it: {}", what, path, std::strerror(errno));
    if (text.size() > max_bytes) error = fmt::format("{} {} is larger than {} bytes", what, path, max_bytes);
  }
  if (!error.empty()) return std::nullopt;
  return text;
}

}  // namespace gpureap::procfs
