// A scan of /proc: every process with its basic facts and its GPU device descriptors.
// Reads through directory fds (openat relative to /proc/<pid>), tolerates processes that
// vanish or deny access mid-scan, and reads the costly files only for processes asked for.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "proc/process_info.hpp"
#include "proc/user_names.hpp"

namespace gpureap {

struct ProcScanOptions {
  std::string proc_root = "/proc";
  std::string dev_dir = "/dev";  // where GPU device files live (GPUREAP_DEV_DIR overrides)
};

class ProcessTable {
 public:
  // Phase 1: for every process, /proc/<pid>/stat and the fd links (to find GPU device files).
  // Details (status, cmdline, exe, cgroup, wchan for D) are then read for every process that
  // holds a GPU device file; call load_details() for others (e.g. driver-listed PIDs).
  // Processes that vanish mid-scan are left out; throws std::system_error only when
  // proc_root itself cannot be opened.
  static ProcessTable scan(const ProcScanOptions& options);

  // Phase 2: status, cmdline, exe, cgroup (and wchan when in D state) for these PIDs.
  // PIDs that are not in the table, or that have vanished, are skipped silently.
  void load_details(std::span<const pid_t> pids);

  const ProcessInfo* find(pid_t pid) const;
  const std::unordered_map<pid_t, ProcessInfo>& processes() const { return processes_; }
  std::vector<pid_t> children_of(pid_t pid) const;  // sorted
  // pid, its parent, grandparent ... up to (and including) PID 1 or the first unknown PID.
  std::vector<pid_t> ancestry(pid_t pid) const;

  const ProcScanOptions& options() const { return options_; }
  // True when this /proc shows a PID namespace other than the host's (we run in a container).
  bool in_child_pid_namespace() const { return in_child_pid_namespace_; }

 private:
  ProcScanOptions options_;
  std::unordered_map<pid_t, ProcessInfo> processes_;
  std::unordered_map<pid_t, std::vector<pid_t>> children_;
  bool in_child_pid_namespace_ = false;
  double boot_time_unix_ = 0;
  long clock_ticks_ = 100;
  UserNames user_names_;
  friend class ProcessTableBuilder;
};

}  // namespace gpureap
