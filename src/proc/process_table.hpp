// A scan of /proc: every process with its basic facts and its GPU device descriptors.
// Reads through directory fds (openat relative to /proc/<pid>), tolerates processes that
// vanish or deny access mid-scan, and reads the costly files only for processes asked for.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "proc/fd_look_memory.hpp"
#include "proc/process_info.hpp"
#include "accounts/user_names.hpp"

namespace gpureap {

// Which processes a scan reads in full (stat and the descriptors; details for holders).
enum class ProcScanScope {
  // Every process: kill and doctor walk the whole table (process groups, cgroups, zombies).
  Everything,
  // Only what `ps` shows: holders of GPU device files, with their ancestors, process-group
  // leaders and descendants, plus processes whose descriptors cannot be read or are empty
  // (kernel threads, zombies). Every other process costs one look at its fd/ directory.
  // A /proc that is not procfs (a test fixture) is read as Everything.
  Holders,
};

struct ProcScanOptions {
  std::string proc_root = "/proc";
  std::string dev_dir = "/dev";  // where GPU device files live (GPUREAP_DEV_DIR overrides)
  ProcScanScope scope = ProcScanScope::Everything;
  // Holders scope only: carried from scan to scan by a caller that repeats them (top), which
  // then looks again only at processes that may have changed (fd_look_memory.hpp).
  std::shared_ptr<FdLookMemory> memory;
  // Holders scope only: the processes to look at instead of every PID in /proc (a holder set
  // kept from the kernel's events, holders/holder_tracker.hpp); their trees are then read as
  // a walk's holders' are. With `memory`, a holder whose GPU descriptors are known from its
  // last full fd/ listing has only those checked (fd_look_memory.hpp).
  std::shared_ptr<const std::vector<pid_t>> only_pids;
  // Holders scope only: the holders' and load_trees' roots' descendants are read too (what
  // ps --tree draws). Without them each costs its children files and every child's look.
  bool descendants = true;
};

class ProcessTable {
 public:
  // Phase 1: for every process (or, in the Holders scope, for those it names), /proc/<pid>/stat
  // and the fd links (to find GPU device files). Every process in the table has been read in
  // full. Details (status, cmdline, exe, cgroup, wchan for D) are then read for every process
  // that holds a GPU device file; call load_details() or load_trees() for others.
  // Processes that vanish mid-scan are left out; throws std::system_error only when
  // proc_root itself cannot be opened.
  static ProcessTable scan(const ProcScanOptions& options);

  // Phase 2: status, cmdline, exe, cgroup (and wchan when in D state) for these PIDs.
  // PIDs that are not in the table, or that have vanished, are skipped silently.
  void load_details(std::span<const pid_t> pids);
  // These PIDs and all their descendants (the PIDs alone in a Holders scan without
  // descendants): read in phase 1 when the scope left them out, then their details loaded. children_of() is complete for every process in these trees.
  void load_trees(std::span<const pid_t> roots);

  const ProcessInfo* find(pid_t pid) const;
  const std::unordered_map<pid_t, ProcessInfo>& processes() const { return processes_; }
  // Sorted. In the Holders scope, complete only inside trees loaded (holders' and load_trees').
  std::vector<pid_t> children_of(pid_t pid) const;
  // Every descendant of pid in the table, pid itself left out: depth first, each before its own
  // children, the highest PID among siblings first. The one walk over a table's trees (target
  // selection, the plan's freeze check, the details a plan loads). Each PID comes once: stat
  // files read at different moments can show a ppid cycle (a parent's PID taken by a child of
  // its child), where the walk ends instead of going round.
  std::vector<pid_t> descendants_of(pid_t pid) const;
  // pid, its parent, grandparent ... up to (and including) PID 1 or the first unknown PID.
  std::vector<pid_t> ancestry(pid_t pid) const;

  const ProcScanOptions& options() const { return options_; }
  // True when this /proc shows a PID namespace other than the host's (we run in a container).
  bool in_child_pid_namespace() const { return in_child_pid_namespace_; }

 private:
  ProcScanOptions options_;
  std::unordered_map<pid_t, ProcessInfo> processes_;
  std::unordered_map<pid_t, std::vector<pid_t>> children_;
  // Holders scope: the children files read so far. ps's load_trees walks the trees of the
  // driver-listed PIDs, mostly the holders' trees the scan has walked already.
  std::unordered_map<pid_t, std::vector<pid_t>> children_read_;
  bool complete_ = true;  // every process is in the table (scope Everything, or fallen back to it)
  bool in_child_pid_namespace_ = false;
  double boot_time_unix_ = 0;
  long clock_ticks_ = 100;
  UserNames user_names_;
  friend class ProcessTableBuilder;
};

}  // namespace gpureap
