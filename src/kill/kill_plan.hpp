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

#include "kill/mps_client_ending.hpp"
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
  // AMD and Intel GPUs (DRM): per PCI address, the device memory of the clients it holds a
  // descriptor of (each client once) and of its KFD allocations made outside them.
  std::map<std::string, std::uint64_t> drm_memory;
  Refusal refusal = Refusal::None;
  std::string refusal_text;        // reason + what to do instead
  bool permission_denied = false;  // we may not signal it (checked before acting)
  std::string permission_text;

  // MPS (snapshot/mps_roles.hpp): a client's server and that server's control daemon, proven
  // by the kernel's socket table; ended through terminate_client before any signal.
  bool mps_client = false;  // listed by the MPS call (whether or not its server was proven)
  MpsClientLink mps_link;   // its proven server and daemon, for terminate_client
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

// A DRM client (one open file description of the GPU's node) the targets hold.
struct PlannedDrmClient {
  std::uint64_t identity = 0;      // drm-client-id, or amdgpu's pasid before 5.19 (drm::client_identity)
  bool by_pasid = false;           // identity is a pasid: the driver may give it to a new client later
  std::uint64_t device_bytes = 0;  // its device memory (drm-total/drm-memory over VRAM regions)
  std::uint64_t shared_bytes = 0;  // of which shared with other clients: may stay with them
  std::vector<pid_t> holders;      // every process showing it in the snapshot
  std::vector<pid_t> outside_holders;  // those of them that will not be signalled
};

// An AMD or Intel GPU (DRM, no NVML) that ending the targets should give memory back on. It is
// released when none of `ending` or `kept` is held any more, no process of `kfd_pids` has a KFD
// context, and the driver's VRAM figure is back to what the remaining clients explain plus what
// was unexplained before (drm_verification.hpp). A driver without a figure (i915, xe) cannot
// show a release: its clients being gone from every descriptor table is all it tells.
struct PlannedDrmGpu {
  std::string pci_address;
  std::string vendor;   // "amd", "intel"
  std::string driver;   // "amdgpu", "i915", "xe"
  std::vector<PlannedDrmClient> ending;  // held by signalled targets alone
  std::vector<PlannedDrmClient> kept;    // also held by a process that is not signalled
  std::vector<pid_t> kfd_pids;           // targets with a KFD context on this GPU
  std::uint64_t expected_free_bytes = 0; // the ending clients' private memory, plus KFD-only allocations
  std::optional<std::uint64_t> baseline_used;  // mem_info_vram_used in the snapshot (amdgpu only)
  std::uint64_t others_bytes = 0;        // device memory of the GPU's other clients then
  // baseline_used less what every client (and KFD-only allocation) explained then: the driver's
  // own use, and frees still in flight or leaks, which may drop on their own meanwhile.
  std::uint64_t unexplained_base = 0;
  std::uint64_t shared_ending = 0;       // shared memory of the ending clients: stays with importers
  std::uint64_t driver_allowance = 0;    // drm::driver_vram_allowance of the GPU
  std::vector<pid_t> target_pids;        // signalled targets holding a client or KFD context of it
};

struct KillPlan {
  std::vector<PlannedTarget> targets;
  std::vector<PlannedGpu> gpus;
  std::vector<PlannedDrmGpu> drm_gpus;
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

// The DRM side of a plan whose targets are decided (drm_plan.cpp): each target's drm_memory
// and the plan's drm_gpus, from the snapshot's DRM reading.
void plan_drm_gpus(KillPlan& plan, const Snapshot& snapshot);

}  // namespace gpureap
