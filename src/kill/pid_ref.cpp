#include "kill/pid_ref.hpp"

#include <cerrno>

#include <csignal>
#include <poll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proc/pid_files.hpp"

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

void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
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
  ref.fd_ = procfs::unique_fd(fd);
  ref.start_ticks_ = expected_start_ticks;
  // Read /proc only now: the fd names whatever held the PID at pidfd_open; if that process
  // started when the snapshot's did, it is the one we looked at.
  const auto stat = procfs::read_stat(proc_root, pid);
  if (!stat) {
    const int error = errno;
    // Out of descriptors (the pidfd took the last one) says nothing about the process:
    // calling it gone would leave it running and unreported.
    if (error == EMFILE || error == ENFILE || error == ENOMEM) {
      result.status = PinStatus::Error;
      result.error = error;
      return result;
    }
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
  if (!fd_) return EBADF;
  if (::syscall(SYS_pidfd_send_signal, fd_.get(), sig, nullptr, 0u) == 0) return 0;
  return errno;
}

bool PidRef::not_reaped() const { return valid() && send_signal(0) != ESRCH; }

std::optional<StatFields> PidRef::read_stat(const std::string& proc_root) const {
  auto stat = procfs::read_stat(proc_root, pid_);
  if (!stat || stat->start_time_ticks != start_ticks_ || !not_reaped()) return std::nullopt;
  return stat;
}

std::optional<StatusFields> PidRef::read_status(const std::string& proc_root) const {
  auto status = procfs::read_status(proc_root, pid_);
  if (!status || !read_stat(proc_root)) return std::nullopt;  // stat after: same process still?
  return status;
}

std::optional<std::string> PidRef::read_wchan(const std::string& proc_root) const {
  std::string wchan = procfs::read_wchan(proc_root, pid_);
  if (!read_stat(proc_root)) return std::nullopt;
  return wchan;
}

bool PidRef::has_exited() const {
  if (!fd_) return true;
  pollfd entry{fd_.get(), POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&entry, 1, 0);
  } while (ready < 0 && errno == EINTR);
  return ready > 0 && (entry.revents & (POLLIN | POLLHUP)) != 0;
}

}  // namespace gpureap
