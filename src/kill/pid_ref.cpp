#include "kill/pid_ref.hpp"

#include <cerrno>
#include <utility>

#include <csignal>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kill/proc_peek.hpp"

namespace gpureap {
namespace {

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

int pidfd_open(pid_t pid) {
  // pidfds are always close-on-exec; flags 0 (PIDFD_NONBLOCK is not needed for poll).
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u));
}

}  // namespace

PidRef::PidRef(PidRef&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      fd_(std::exchange(other.fd_, -1)),
      start_ticks_(std::exchange(other.start_ticks_, 0)) {}

PidRef& PidRef::operator=(PidRef&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    pid_ = std::exchange(other.pid_, -1);
    fd_ = std::exchange(other.fd_, -1);
    start_ticks_ = std::exchange(other.start_ticks_, 0);
  }
  return *this;
}

PidRef::~PidRef() {
  if (fd_ >= 0) ::close(fd_);
}

PinResult PidRef::pin(pid_t pid, std::uint64_t expected_start_ticks, const std::string& proc_root) {
  PinResult result;
  if (pid <= 0) {
    result.status = PinStatus::Error;
    result.error = EINVAL;
    return result;
  }
  const int fd = pidfd_open(pid);
  if (fd < 0) {
    const int error = errno;
    if (error == ESRCH) {
      result.status = PinStatus::Gone;
    } else if (error == ENOSYS) {
      result.status = PinStatus::Unsupported;
    } else {
      result.status = PinStatus::Error;
    }
    result.error = error;
    return result;
  }
  PidRef ref;
  ref.pid_ = pid;
  ref.fd_ = fd;
  ref.start_ticks_ = expected_start_ticks;
  // Read /proc only now: the fd names whatever held the PID at pidfd_open; if that process
  // started when the snapshot's did, it is the one we looked at.
  const auto stat = killproc::read_stat(proc_root, pid);
  if (!stat) {
    // Gone between pidfd_open and the read (or reaped): nothing left to signal.
    result.status = PinStatus::Gone;
    result.error = ESRCH;
    return result;
  }
  if (stat->start_time_ticks != expected_start_ticks) {
    result.status = PinStatus::IdentityChanged;
    return result;
  }
  result.status = PinStatus::Ok;
  result.ref = std::move(ref);
  return result;
}

int PidRef::send_signal(int sig) const {
  if (fd_ < 0) return EBADF;
  if (::syscall(SYS_pidfd_send_signal, fd_, sig, nullptr, 0u) == 0) return 0;
  return errno;
}

bool PidRef::has_exited() const {
  if (fd_ < 0) return true;
  pollfd entry{fd_, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&entry, 1, 0);
  } while (ready < 0 && errno == EINTR);
  return ready > 0 && (entry.revents & (POLLIN | POLLHUP)) != 0;
}

}  // namespace gpureap
