// A process pinned for reads after the scan: its pidfd and its /proc/<pid> directory, opened
// together and checked against the start time the scan saw. Every read goes through that
// directory and is confirmed afterwards (the pidfd still names an unreaped process), so a PID
// reused meanwhile can never feed a decision: the reads of an exited process fail instead.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "proc/device_fd_probe.hpp"
#include "proc/proc_io.hpp"
#include "proc/process_info.hpp"

namespace gpureap::procfs {

class PinnedProcess {
 public:
  // nullopt when the process is gone, its PID now names another process (another start
  // time), or the kernel has no pidfd_open; `why` says which.
  static std::optional<PinnedProcess> pin(const std::string& proc_root, pid_t pid, std::uint64_t start_time_ticks,
                                          std::string& why);
  // The same for a process already named by a pidfd (one fanotify made for an opener): its
  // start time is read through the directory once the pidfd proves it still runs.
  static std::optional<PinnedProcess> adopt(const std::string& proc_root, pid_t pid, unique_fd pidfd,
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
  // Whether it holds a GPU device file under dev_dir (the node itself, as the scan checks):
  // DeviceFile with what it holds, OtherFiles, NoFiles; Gone once it has exited, Denied.
  FdProbe device_files(std::string_view dev_dir, std::vector<DeviceFileHandle>& held) const;

 private:
  bool still_there_since(std::uint64_t start_time_ticks);

  pid_t pid_ = 0;
  std::uint64_t start_ticks_ = 0;
  unique_fd pidfd_;
  unique_fd dir_;
};

}  // namespace gpureap::procfs
