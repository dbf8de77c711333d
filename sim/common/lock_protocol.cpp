#include "common/lock_protocol.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "common/file_io.hpp"

namespace gpusim {

static int open_retry(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

Result<ContextLocks> acquire_context_locks(const std::string& hold_path,
                                           const std::string& owner_path) {
  ContextLocks locks;
  // No O_CLOEXEC: inheritance by fork() (and exec) is the point, as with CUDA's descriptors.
  locks.hold_fd = open_retry(hold_path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
  if (locks.hold_fd < 0) return Error{hold_path + ": " + errno_text(errno)};
  ::fchmod(locks.hold_fd, 0666);
  while (::flock(locks.hold_fd, LOCK_SH) != 0) {
    if (errno != EINTR) {
      int e = errno;
      ::close(locks.hold_fd);
      return Error{hold_path + ": flock: " + errno_text(e)};
    }
  }
  locks.owner_fd = open_retry(owner_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (locks.owner_fd < 0) {
    int e = errno;
    ::close(locks.hold_fd);
    return Error{owner_path + ": " + errno_text(e)};
  }
  ::fchmod(locks.owner_fd, 0666);
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (::fcntl(locks.owner_fd, F_SETLK, &fl) != 0) {
    int e = errno;
    ::close(locks.owner_fd);
    ::close(locks.hold_fd);
    return Error{owner_path + ": fcntl(F_SETLK): " + errno_text(e)};
  }
  return locks;
}

Probe probe_held(const std::string& hold_path) {
  int fd = open_retry(hold_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return errno == ENOENT ? Probe::Gone : Probe::Yes;
  Probe result = Probe::Yes;
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      // Nobody shares the lock any more; let go at once (close would too).
      ::flock(fd, LOCK_UN);
      result = Probe::No;
      break;
    }
    if (errno == EINTR) continue;
    result = Probe::Yes;  // EWOULDBLOCK: still held; anything else: assume held
    break;
  }
  ::close(fd);
  return result;
}

int open_owner_file(const std::string& owner_path) {
  return open_retry(owner_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
}

Probe probe_owner_alive(int owner_fd) {
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  if (::fcntl(owner_fd, F_GETLK, &fl) == 0) return fl.l_type == F_UNLCK ? Probe::No : Probe::Yes;
  return Probe::Yes;
}

Probe probe_owner_alive(const std::string& owner_path) {
  int fd = open_owner_file(owner_path);
  if (fd < 0) return errno == ENOENT ? Probe::Gone : Probe::Yes;
  Probe result = probe_owner_alive(fd);
  ::close(fd);
  return result;
}

static Result<std::int64_t> parse_stamp(const std::string& text, const std::string& path) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p == text.data()) return Error{path + ": bad release stamp"};
  return v;
}

Result<std::int64_t> read_released(const std::string& released_path) {
  ReadResult r = read_file(released_path);
  if (!r.ok()) return Error{r.error.message};
  return parse_stamp(r.data, released_path);
}

Result<std::int64_t> stamp_released(const std::string& released_path, std::int64_t now_ns) {
  if (auto existing = read_released(released_path); existing.ok()) return existing;
  auto slash = released_path.rfind('/');
  std::string tmp = released_path.substr(0, slash + 1) + "." +
                    released_path.substr(slash + 1) + ".tmp." + random_hex(6);
  int fd = open_retry(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return Error{tmp + ": " + errno_text(errno)};
  ::fchmod(fd, 0666);
  std::string text = std::to_string(now_ns);
  bool wrote = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!wrote) {
    ::unlink(tmp.c_str());
    return Error{tmp + ": short write"};
  }
  int rc = ::link(tmp.c_str(), released_path.c_str());
  int e = errno;
  ::unlink(tmp.c_str());
  if (rc == 0) return now_ns;
  if (e == EEXIST) return read_released(released_path);
  return Error{released_path + ": link: " + errno_text(e)};
}

}  // namespace gpusim
