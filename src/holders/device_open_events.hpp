// Every open and last close of a GPU device node, with the opener's pidfd: a fanotify group in
// file-handle mode (FAN_REPORT_FID) that reports pidfds (FAN_REPORT_PIDFD, Linux 5.15), with an
// inode mark on each node. Character devices deliver FAN_OPEN and FAN_CLOSE only in file-handle
// mode; in the default descriptor mode they deliver nothing (measured on 6.18: /dev/null and a
// mknod node), while a regular file (the simulator's nodes) delivers in both. The kernel makes
// the pidfd when the event is read, from the very process that opened: a PID reused since
// cannot stand in for it, and a process that has exited comes with none. Needs CAP_SYS_ADMIN.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "proc/proc_io.hpp"

namespace gpureap::holders {

struct DeviceOpen {
  pid_t pid = 0;              // 0: the process is outside our PID namespace
  procfs::unique_fd pidfd;    // empty: it has exited since
  bool opened = false;        // FAN_OPEN (an open and its close may come as one event)
  bool closed = false;        // FAN_CLOSE: the last descriptor of one open file went away
};

struct DeviceOpenBatch {
  std::vector<DeviceOpen> events;
  bool overflowed = false;  // FAN_Q_OVERFLOW: the kernel dropped events; only a walk can tell what
};

class DeviceOpenEvents {
 public:
  // nullopt with the reason when fanotify cannot be used here in this mode.
  static std::optional<DeviceOpenEvents> open(std::string* why);

  int fd() const { return fd_.get(); }
  // Marks the node at `path` (not following a final symbolic link). False with the reason.
  bool mark(const std::string& path, std::string* why);
  // Appends every event queued (non-blocking) to `batch`.
  void drain(DeviceOpenBatch& batch);

 private:
  DeviceOpenEvents() = default;
  procfs::unique_fd fd_;
};

}  // namespace gpureap::holders
