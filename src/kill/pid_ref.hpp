// A process pinned by identity: PID + pidfd + start time. Taken when the snapshot is read,
// verified against /proc right after pidfd_open (so the fd names the process we looked at),
// and the only way gpureap ever signals anything (pidfd_send_signal): a PID reused by a
// stranger in between can never receive our signal.
#pragma once

#include <cstdint>
#include <string>

#include <sys/types.h>

namespace gpureap {

enum class PinStatus {
  Ok,
  Gone,             // no such process any more (or a zombie already reaped)
  IdentityChanged,  // a process with this PID exists but started at another time: PID reuse
  Unsupported,      // the kernel has no pidfd_open (< 5.3): we refuse to signal by bare PID
  Error,            // another errno, in `error`
};

struct PinResult;

class PidRef {
 public:
  PidRef() = default;
  PidRef(PidRef&& other) noexcept;
  PidRef& operator=(PidRef&& other) noexcept;
  PidRef(const PidRef&) = delete;
  PidRef& operator=(const PidRef&) = delete;
  ~PidRef();

  // pidfd_open(pid), then re-read <proc_root>/<pid>/stat: its start time must equal
  // expected_start_ticks, else IdentityChanged and no fd is kept.
  static PinResult pin(pid_t pid, std::uint64_t expected_start_ticks, const std::string& proc_root = "/proc");

  pid_t pid() const { return pid_; }
  int fd() const { return fd_; }
  std::uint64_t start_time_ticks() const { return start_ticks_; }
  bool valid() const { return fd_ >= 0; }

  // pidfd_send_signal(fd, sig). Returns 0, or the errno (ESRCH: already exited; EPERM).
  int send_signal(int sig) const;
  // True once the process has exited (the pidfd polls readable); never blocks.
  bool has_exited() const;

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::uint64_t start_ticks_ = 0;
};

struct PinResult {
  PinStatus status = PinStatus::Error;
  int error = 0;  // errno for Error
  PidRef ref;     // valid() only when status == Ok
};

}  // namespace gpureap
