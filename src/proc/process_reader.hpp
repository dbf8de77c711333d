// Reads one process from /proc: phase 1 (stat and the fd links, for every process) and
// phase 2 (status, cmdline, exe, cgroup, wchan, and for device-file holders the GPU libraries mapped; for the processes asked for).
// One reader per thread: it owns the reused buffers. Internal to src/proc.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "proc/device_node_check.hpp"
#include "proc/fd_look_memory.hpp"
#include "proc/proc_io.hpp"
#include "proc/process_info.hpp"
#include "accounts/user_names.hpp"

namespace gpureap::procfs {

// What turns clock ticks and pages into seconds and bytes, fixed for one scan.
struct ScanClock {
  double boot_time_unix = 0;
  double now_unix = 0;  // when the scan started
  double ticks_per_second = 100;
  std::uint64_t page_size = 4096;
};

class ProcessReader {
 public:
  // is_procfs: proc_root is a procfs mount (allows procfs-only shortcuts), not a fixture tree.
  ProcessReader(const ScanClock& clock, std::string_view dev_dir, bool is_procfs);

  // Phase 1: stat and GPU device descriptors of /proc/<pid>, and for a holder of a device file
  // its details too (phase 2, all but the user name: see read_details). nullopt when the
  // process is gone (or its stat unreadable); a denied fd/ is reported in fd_access, not as
  // failure.
  // `probed`: the device files a DeviceFdProbe has just found in "<pid>/fd", taken instead of
  // listing fd/ again when the process read is certainly the one probed (started before the
  // scan, so the PID was not reused in between).
  std::optional<ProcessInfo> read(int root_fd, pid_t pid,
                                  std::vector<DeviceFileHandle>* probed = nullptr);

  // Phase 1 for a holder whose GPU descriptors are known from its last full fd/ listing:
  // its stat, then each known descriptor's link and device node checked through its
  // /proc/<pid> directory, without listing fd/. nullopt when it is not the same process (start
  // time), or any known descriptor is closed or now another file: its fd/ is then to be listed.
  std::optional<ProcessInfo> read_known_holder(int root_fd, pid_t pid, const FdLookMemory::Details& known);

  // Phase 1 for a process whose fd/ a DeviceFdProbe has just found empty (a kernel thread, a
  // process with no descriptor open): its stat alone, read as "<pid>/stat". A zombie is read
  // with read(): its other threads may still hold files.
  std::optional<ProcessInfo> read_without_files(int root_fd, pid_t pid);

  // Phase 2 for a process read in phase 1. False, with `info` untouched, when the process
  // has gone or its PID now names another process (a different start time).
  bool read_details(int root_fd, ProcessInfo& info, UserNames& users);

  // Holders' details in read() come from `memory` while it has them, and what read() used or
  // read is appended to `kept` (a scan in the Holders scope repeated by top). A holder read in
  // full has its files kept with them (FdLookMemory's KeptHolderFiles) while `file_budget`,
  // shared by the scan's threads, is above 0.
  void remember_details(const FdLookMemory* memory, std::vector<std::pair<pid_t, FdLookMemory::Details>>* kept,
                        std::atomic<std::ptrdiff_t>* file_budget) {
    memory_ = memory;
    kept_ = kept;
    file_budget_ = file_budget;
  }

 private:
  std::optional<ProcessInfo> read_stat(int dirfd, const char* path, pid_t pid);
  std::optional<ProcessInfo> info_from_stat(std::optional<std::string_view> text, pid_t pid) const;
  void fill_from_stat(ProcessInfo& info, StatFields& stat) const;
  bool started_before_scan(const ProcessInfo& info) const;
  void read_device_files(int pid_fd, ProcessInfo& info);
  bool list_device_files(int fd_dir, ProcessInfo& info);
  bool still_holds(int pid_fd, const DeviceFileHandle& file);
  void read_detail_files(int pid_fd, ProcessInfo& info);
  void holder_details(int pid_fd, ProcessInfo& info, unique_fd* dir_to_keep = nullptr);
  std::shared_ptr<const KeptHolderFiles> keep_files(unique_fd* dir, const ProcessInfo& info);
  std::optional<ProcessInfo> read_kept_stat(const KeptHolderFiles& files, pid_t pid);
  std::optional<ProcessInfo> read_through_kept(pid_t pid, int& dir_fd);
  void read_wchan(int pid_fd, ProcessInfo& info);
  void read_gpu_library_maps(int pid_fd, ProcessInfo& info);

  ScanClock clock_;
  std::string_view dev_dir_;
  bool is_procfs_;
  ReadBuffer buffer_;
  DirLister lister_;
  const FdLookMemory* memory_ = nullptr;
  std::vector<std::pair<pid_t, FdLookMemory::Details>>* kept_ = nullptr;
  std::atomic<std::ptrdiff_t>* file_budget_ = nullptr;
  DeviceNodeCheck nodes_;
};

}  // namespace gpureap::procfs
