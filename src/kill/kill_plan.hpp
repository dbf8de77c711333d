// The plan shown before acting: every selected process with why it was chosen, its state,
// user, command and the GPU memory it should free, and the ones refused by policy with the
// reason and what to do instead. Built from one snapshot; nothing here signals anything.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "kill/protected_processes.hpp"
#include "kill/target_selection.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

enum class Refusal {
  None,
  PidOneOrLess,   // PID <= 1: init (or the idle task)
  Self,           // gpureap itself
  Ancestor,       // the shell or job that runs gpureap
  KernelThread,
  Foreign,        // the driver's PID does not exist in this PID namespace
  Mismatch,       // a process with that PID exists here but is not the GPU process
  Unverifiable,   // in a PID namespace and cannot check the descriptors
  Protected,      // display server, driver daemon, monitoring (--force overrides)
  MpsServer,      // an MPS server (or control daemon) reached as a side effect, or serving clients left running
};
std::string refusal_name(Refusal refusal);  // "pid-1", "self", "ancestor", "kernel-thread", ...

struct PlannedTarget {
  pid_t pid = 0;
  std::uint64_t start_time_ticks = 0;
  bool present = false;            // exists in this PID namespace
  std::string reason;              // why it was selected
  std::optional<pid_t> via;        // the target it was added for (tree/group)
  bool by_group = false;
  // Linux facts (empty / '?' when not present here).
  std::optional<uid_t> uid;
  std::string user;
  char state = '?';
  std::string wchan;
  pid_t ppid = 0;
  pid_t pgid = 0;
  std::string command;
  std::string container;           // "docker 4f2a9c1b7d3e", "" when none
  std::string container_id;
  std::map<unsigned, std::uint64_t> gpu_memory;  // what the driver lists for it, per GPU index
  bool gpu_memory_unknown = false;               // listed with memory the driver does not know
  std::vector<unsigned> holds_gpus;              // GPU device files it holds
  Refusal refusal = Refusal::None;
  std::string refusal_text;        // reason + what to do instead
  bool permission_denied = false;  // we may not signal it (checked before acting)
  std::string permission_text;

  // MPS (snapshot/mps_roles.hpp): a client's server and that server's control daemon, proven
  // by the kernel's socket table; ended through terminate_client before any signal.
  bool mps_client = false;  // listed by the MPS call (whether or not its server was found)
  std::optional<pid_t> mps_server;
  std::optional<pid_t> mps_control_daemon;
  bool mps_server_role = false;  // it is an MPS server: signalled after the plan's clients

  bool zombie() const { return state == 'Z'; }
  // Will be signalled: present, not refused, not a zombie, permitted.
  bool actionable() const { return present && refusal == Refusal::None && !permission_denied && !zombie(); }
};

struct PlannedGpu {
  unsigned index = 0;
  std::uint64_t expected_free_bytes = 0;          // the targets' listed memory on it, plus orphaned_bytes
  std::uint64_t orphaned_bytes = 0;               // unattributed memory held only by targeted orphans
  std::optional<std::uint64_t> baseline_used;     // used bytes in the snapshot
  std::uint64_t others_listed_bytes = 0;          // listed memory of processes not targeted
  std::vector<pid_t> target_pids;                 // targets listed on it or holding its file
};

struct KillPlan {
  std::vector<PlannedTarget> targets;
  std::vector<PlannedGpu> gpus;
  std::vector<pid_t> missing;  // named PIDs that do not exist
};

// Who runs gpureap and what it may signal; taken from the live process by default.
struct PlanPolicy {
  ProtectedProcesses protect = ProtectedProcesses::builtin();
  bool force = false;                 // overrides protection, never identity
  pid_t self = 0;
  std::vector<pid_t> self_ancestry;   // parent, grandparent, ... (PIDs as this /proc shows)
  uid_t real_uid = 0;
  uid_t effective_uid = 0;
  bool can_kill_any = false;          // root or CAP_KILL

  static PlanPolicy for_current_process(const Snapshot& snapshot);
};

// The kernel's rule (kill_ok_by_cred): without CAP_KILL, the sender's real or effective uid
// must equal the target's real or saved uid. Its effective uid does not count.
bool may_signal(const ProcessInfo& process, const PlanPolicy& policy);

// "permission denied: PID 7 belongs to ann (uid 1000); signalling it needs root or ann".
std::string permission_denied_text(pid_t pid, const std::string& user, uid_t uid);

KillPlan build_plan(const Snapshot& snapshot, const Selection& selection, const PlanPolicy& policy);

}  // namespace gpureap
