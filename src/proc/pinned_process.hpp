// A process pinned for reads after the scan: its pidfd and its /proc/<pid> directory, opened
// together and checked against the start time the scan saw. Every read goes through that
// directory and is confirmed afterwards (the pidfd still names an unreaped process), so a PID
// reused meanwhile can never feed a decision: the reads of an exited process fail instead.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <sys/types.h>

#include "proc/proc_io.hpp"
#include "proc/process_info.hpp"

namespace gpureap::procfs {

class PinnedProcess {
 public:
  // nullopt when the process is gone, its PID now names another process (another start
  // time), or the kernel has no pidfd_open; `why` says which.
  static std::optional<PinnedProcess> pin(const std::string& proc_root, pid_t pid, std::uint64_t start_time_ticks,
                                          std::string& why);

  pid_t pid() const { return pid_; }
  int dir() const { return dir_.get(); }
  std::uint64_t start_time_ticks() const { return start_ticks_; }

  // Whether the pinned process is still there (not reaped, not a zombie): reads made before
  // this answered true describe it.
  bool still_there() const;
  std::optional<StatusFields> status() const;
  // The socket inodes among its descriptors; empty when unreadable or gone.
  std::set<std::uint64_t> socket_inodes() const;
  // The file it runs, opened through its exe link (the very file, whatever path names it now).
  unique_fd open_executable() const;
  // Its root directory (a container's), for paths it names.
  unique_fd open_root() const;

 private:
  pid_t pid_ = 0;
  std::uint64_t start_ticks_ = 0;
  unique_fd pidfd_;
  unique_fd dir_;
};

}  // namespace gpureap::procfs
