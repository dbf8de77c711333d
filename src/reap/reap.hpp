// `gpureap reap`: what a job provably owns, chosen from one snapshot, and the check afterwards
// that each GPU it used is back to its baseline. The ownership proof is the job's cgroup (every
// process in its subtree) or its user's GPU processes (listed by the driver or holding an NVIDIA
// device file; the real uid decides); a GPU alone proves nothing. Signalling goes through the
// kill pipeline (kill_run's prepare_kill with no tree expansion and carry_out_kill); the baseline
// check is gpu_baseline's.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <sys/types.h>

#include "kill/kill_outcome.hpp"
#include "kill/kill_plan.hpp"
#include "kill/target_selection.hpp"
#include "reap/gpu_baseline.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

struct ReapCriteria {
  std::optional<std::string> cgroup_dir;  // resolved cgroup v2 directory (resolve_cgroup_dir)
  std::vector<pid_t> cgroup_pids;         // its subtree's members, read when the snapshot was taken
  std::optional<std::set<uid_t>> uids;    // real uids
  // --gpus: NVIDIA GPUs by index, and AMD and Intel GPUs by PCI address; both present or both
  // absent.
  std::optional<std::set<unsigned>> gpus;
  std::optional<std::set<std::string>> drm_gpus;
  std::vector<std::string> except;        // comm or executable basename, compared exactly
};

// A process the criteria matched that is left alone, and why.
struct SparedProcess {
  pid_t pid = 0;
  std::string command;
  std::string reason;  // "--except python", "an ancestor of gpureap"
};

struct ReapSelection {
  Selection selection;                // reasons filled in; no tree or group expansion
  std::vector<SparedProcess> spared;
  std::set<unsigned> gpus_used;       // GPUs the selection is listed on or holds the file of
  // Driver-listed PIDs whose memory belongs to the selection: the selected ones, plus exited
  // PIDs whose context only selected processes keep alive.
  std::set<pid_t> listed_pids;
};

// The cgroup v2 directory PATH names: absolute under the v2 mount, or relative to it (with or
// without a leading '/', as /proc/PID/cgroup shows it). Empty with `error` set (one line) when
// there is no v2 hierarchy, the directory does not exist, is not a cgroup, or is the root.
std::string resolve_cgroup_dir(const std::string& path, const std::string& proc_root, std::string& error);

// Needs details (uids, exe) of candidates: loads them into snapshot.table.
ReapSelection select_reap(Snapshot& snapshot, const ReapCriteria& criteria, const PlanPolicy& policy);

// A process of the job still alive after the ladder: a target that survived, or a member of
// the cgroup that is still there (it joined after the snapshot).
struct Survivor {
  pid_t pid = 0;
  char state = '?';
  std::string wchan;  // for D
  std::string command;
  std::string why;    // "stuck in D state", "survived SIGKILL", "joined the cgroup during the reap", ...
};

// Survivors from the report, plus what is left in the cgroup (re-read now) that is not spared.
std::vector<Survivor> find_survivors(const KillReport& report, const ReapSelection& selection,
                                     const ReapCriteria& criteria, const std::string& proc_root);

// Everything `reap` did, as values; rendering and the exit status are the CLI's.
struct ReapReport {
  ReapCriteria criteria;
  double verify_timeout_s = 30;
  KillReport kill;                    // the ladder's outcome per target (and its settings)
  std::vector<SparedProcess> spared;
  std::vector<ReapGpuResult> gpus;    // empty with --dry-run, or when no GPU is involved
  std::vector<Survivor> survivors;
  bool driver_unreadable = false;     // GPUs had to be verified and the driver could not be read
};

// Worst first; the CLI maps it to an exit status (docs/exit-codes.md, `gpureap reap`).
enum class ReapVerdict { Interrupted, Remains, PermissionDenied, Refused, DriverUnreadable, Ok };
ReapVerdict reap_verdict(const ReapReport& report);

}  // namespace gpureap
