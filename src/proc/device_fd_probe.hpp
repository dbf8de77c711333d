// The cheap first look at one process for `ps`: does /proc/<pid>/fd hold a GPU device file?
// One openat of "<pid>/fd", its listing and one readlink per descriptor; no stat, no
// /proc/<pid> directory (an empty listing adds one readlink, of its cwd). A holder's
// descriptors are all read, so that the reader need not list them again. Internal to src/proc.
#pragma once

#include <string_view>
#include <vector>

#include <sys/types.h>

#include "proc/device_node_check.hpp"
#include "proc/proc_io.hpp"
#include "proc/process_info.hpp"

namespace gpureap::procfs {

enum class FdProbe {
  DeviceFile,  // holds at least one GPU device file
  OtherFiles,  // has descriptors, none of them a GPU device file
  NoFiles,     // no descriptor at all: a kernel thread, a zombie (whose threads may hold some)
  EmptyAlive,  // (probe() only) no descriptor in a process that has not exited, its cwd still
               // there: a kernel thread, or one that closed them all; nothing of it holds one
  Denied,      // not ours to read
  Gone,        // exited since the listing
};

class DeviceFdProbe {
 public:
  // is_procfs: the directory listings may stop at the first short batch (see DirLister).
  DeviceFdProbe(std::string_view dev_dir, bool is_procfs);
  // With DeviceFile, `held` has every GPU device file of the listing (in descriptor order),
  // or is empty when a later link could not be read; otherwise it is empty.
  FdProbe probe(int root_fd, pid_t pid, std::vector<DeviceFileHandle>& held);
  // The same for an fd/ directory already open (a pinned process's).
  FdProbe probe_fd_dir(int fd_dir, std::vector<DeviceFileHandle>& held);

 private:
  std::string_view dev_dir_;
  bool is_procfs_;
  ReadBuffer buffer_;
  DirLister lister_;
  DeviceNodeCheck nodes_;
};

}  // namespace gpureap::procfs
