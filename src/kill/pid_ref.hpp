// A process pinned by identity: PID + pidfd + start time. Taken when the snapshot is read,
// verified against /proc right after pidfd_open (so the fd names the process we looked at),
// and the only way gpureap ever signals anything (pidfd_send_signal): a PID reused by a
// stranger in between can never receive our signal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <sys/types.h>

#include "proc/process_info.hpp"
#include "proc/proc_io.hpp"

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

  // pidfd_open(pid), then re-read <proc_root>/<pid>/stat: its start time must equal
  // expected_start_ticks, else IdentityChanged and no fd is kept.
  static PinResult pin(pid_t pid, std::uint64_t expected_start_ticks, const std::string& proc_root = "/proc");

  pid_t pid() const { return pid_; }
  int fd() const { return fd_.get(); }
  std::uint64_t start_time_ticks() const { return start_ticks_; }
  bool valid() const { return static_cast<bool>(fd_); }

  // pidfd_send_signal(fd, sig). Returns 0, or the errno (ESRCH: already exited; EPERM).
  int send_signal(int sig) const;
  // True once the process has exited (the pidfd polls readable); never blocks.
  bool has_exited() const;
  // Not yet reaped: the pidfd still names a process (running or a zombie). False once the
  // PID could name someone else.
  bool not_reaped() const;

  // Reads of /proc/<pid> that feed a report, checked after the read (the systemd PidRef
  // pattern): the stat read must carry our start time and the pidfd must still name an
  // unreaped process, otherwise the read may describe a stranger and is discarded (nullopt).
  std::optional<StatFields> read_stat(const std::string& proc_root) const;
  std::optional<StatusFields> read_status(const std::string& proc_root) const;
  std::optional<std::string> read_wchan(const std::string& proc_root) const;

 private:
  pid_t pid_ = -1;
  procfs::unique_fd fd_;
  std::uint64_t start_ticks_ = 0;
};

// One pidfd per member: raise the soft RLIMIT_NOFILE to the hard limit before pinning, so that
// a large tree fits (the kill start calls it). A process that still cannot be pinned (EMFILE)
// is reported as a failure of the kill, never left out silently.
void raise_open_file_limit();

struct PinResult {
  PinStatus status = PinStatus::Error;
  int error = 0;  // errno for Error
  PidRef ref;     // valid() only when status == Ok
};

}  // namespace gpureap
