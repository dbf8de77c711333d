// One snapshot at the centre: the driver's view and Linux's view joined.
// Every command (ps, kill, doctor, watch, export, top) is a view or an action over this.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "drm/drm_reading.hpp"
#include "nvml/driver_reading.hpp"
#include "nvml/nvml_library.hpp"
#include "proc/process_table.hpp"
#include "snapshot/holder_events.hpp"

namespace gpureap {

// How far a driver-listed PID can be trusted to be the process using the GPU.
enum class Identity {
  Ok,          // exists here and holds that GPU's device file
  Foreign,     // no such PID in this PID namespace: a container's process, or gone
  Mismatch,    // a process with that PID exists here but holds no device file of that GPU
  Unverified,  // cannot check (no permission), or an MPS client
};
std::string identity_name(Identity identity);

struct DriverStatus {
  bool loaded = false;           // library loaded and initialised
  LoadFailure failure = LoadFailure::None;
  int nvml_code = 0;
  std::string message;           // one line for a person when !loaded
  std::string library_path;
  std::string driver_version;
  std::string nvml_version;
  std::optional<int> cuda_driver_version;
  std::optional<NvmlError> count_error;
  // When !loaded: what shows NVIDIA GPUs here without the library (nvidia_presence.hpp), "" when
  // nothing does (an AMD- or Intel-only host, where no NVIDIA library is normal).
  std::string nvidia_hardware;
  // The library is missing on a host with no sign of NVIDIA GPUs: nothing NVIDIA's is to inspect.
  bool no_nvidia_gpus() const { return !loaded && failure == LoadFailure::LibraryNotFound && nvidia_hardware.empty(); }
};

struct GpuMemoryAccount {
  std::optional<std::uint64_t> total, used, reserved, free;
  std::string source;                         // "v2" or "v1"
  std::uint64_t attributed = 0;               // sum of listed processes' known memory
  std::optional<std::uint64_t> unattributed;  // used - attributed; unknown when any part is
  // Part of `attributed`: listed under PIDs that have exited while processes they forked keep
  // the context (and so the memory) alive. The driver keeps listing a context under its
  // creator (docs/performance.md, the real-GPU runs).
  std::uint64_t held_for_exited = 0;
};

struct GpuView {
  GpuReading reading;
  GpuMemoryAccount memory;
};

// What a listed process is to NVIDIA's Multi-Process Service (mps_roles.hpp).
enum class MpsRole {
  None,
  Server,  // nvidia-cuda-mps-server: holds the shared context and the device files
  Client,  // listed by the MPS call: its work runs in a server
};
// "server", "client" (ps JSON); "" for None.
std::string_view mps_role_name(MpsRole role);

struct GpuProcessView {
  unsigned gpu_index = 0;
  DriverProcess driver;
  Identity identity = Identity::Unverified;
  std::string identity_reason;  // why, in words, when not Ok
  const ProcessInfo* linux_process = nullptr;  // into Snapshot::table; null when not found here
  // For a listed PID that has exited (on the host): the holders that inherited its
  // descriptors and keep its context alive. Empty otherwise.
  std::vector<pid_t> held_by;
  // For a `foreign` PID while gpureap runs in a child PID namespace (a container): the
  // processes here that hold this GPU's device file and that the driver lists under no PID of
  // ours. Its host PID is one of theirs or a process's outside this namespace; nothing here
  // maps one to the other, so this explains, and is never a target.
  std::vector<pid_t> holders_here;
  MpsRole mps_role = MpsRole::None;
  // A client: the server its connection goes to, proven by the kernel's socket table (a
  // socket of this process whose peer a socket of the server is); nullopt when unproven.
  std::optional<pid_t> mps_server;
  // A server: the proven control daemon that started it (its parent; see MpsControlDaemon).
  std::optional<pid_t> mps_control_daemon;
  std::size_t mps_clients = 0;  // a server: the clients proven connected to it on this GPU
};

// What a process holding an NVIDIA device file is to the GPU's jobs.
enum class HolderRole {
  GpuProcess,  // the driver lists it
  Worker,      // an ancestor is listed: it belongs to a running job
  Orphan,      // its job is provably over (see OrphanEvidence); the only role kill/fix may take unasked
  Client,      // control files only, or NVML without CUDA: a monitor; holds no memory
  Unlisted,    // none of the above: holds a GPU file for a reason we cannot prove
};
// "gpu-process", "worker", "orphan", "client", "unlisted" (ps and doctor JSON).
std::string_view holder_role_name(HolderRole role);

// Why a holder is called an orphan of a dead job. PPID 1 alone proves nothing: every service
// has it. Only these do.
enum class OrphanEvidence {
  None,
  ExitedListedGroupLeader,    // the driver lists an exited PID that led its process group
  ExitedListedSessionLeader,  // the driver lists an exited PID that led its session
  GroupLeaderGone,            // its process-group leader is gone (and it is not a session leader)
  SessionLeaderGone,          // its session leader is gone (and it is not one itself)
};
// "none", "exited-listed-group-leader", "exited-listed-session-leader", "group-leader-gone",
// "session-leader-gone".
std::string_view orphan_evidence_name(OrphanEvidence evidence);

struct HolderView {
  pid_t pid = 0;
  const ProcessInfo* linux_process = nullptr;  // never null
  std::vector<unsigned> gpus;                  // indices of GPUs whose nvidia<minor> it holds
  bool listed_by_driver = false;
  HolderRole role = HolderRole::Unlisted;
  OrphanEvidence orphan_evidence = OrphanEvidence::None;  // set exactly when role is Orphan
  std::vector<pid_t> evidence_pids;  // the exited listed PID or the gone leader the evidence names
  std::optional<pid_t> listed_ancestor;        // nearest ancestor the driver lists
  std::vector<pid_t> ancestry;                 // parent, grandparent, ... up to PID 1
  std::optional<pid_t> context_of;             // the exited listed PID whose context it keeps alive

  bool holds_gpu(unsigned index) const { return std::find(gpus.begin(), gpus.end(), index) != gpus.end(); }
};

// An MPS control daemon as the kernel proves it: a process of root's that holds the socket
// listening at <pipe_dir>/control, where that path still names that very socket. No name, pid
// file or environment proves one: any user can write those.
struct MpsControlDaemon {
  pid_t pid = 0;
  std::uint64_t start_time_ticks = 0;
  std::string pipe_dir;  // as the daemon bound its socket (absolute, in its mount namespace)
};

struct Snapshot {
  std::chrono::system_clock::time_point taken_at;
  DriverStatus driver;
  std::vector<GpuView> gpus;
  std::vector<GpuProcessView> processes;
  std::vector<HolderView> holders;
  ProcessTable table;
  bool in_child_pid_namespace = false;
  pid_t self_pid = ::getpid();  // left out of holders: gpureap's own NVML descriptors
  // Processes whose descriptors we may not read (other users', when not root): holders
  // among them are invisible, and the views must say so.
  std::size_t processes_not_inspected = 0;
  // The GPUs NVML does not see (AMD, Intel: DRM devices), their clients and KFD processes.
  drm::DrmReading drm;
  // The MPS control daemons proven among the parents of the listed processes.
  std::vector<MpsControlDaemon> mps_daemons;
  // With SnapshotOptions::event_holders in the Holders scope: how the holders were found.
  std::optional<HolderEventsState> holder_events;

  const GpuView* gpu_by_minor(unsigned minor) const;
  const GpuView* gpu_by_index(unsigned index) const;
  // Whether the driver lists `pid` on any GPU.
  bool lists(pid_t pid) const;
  // The proven MPS control daemon `pid`, or null.
  const MpsControlDaemon* mps_daemon(pid_t pid) const;
  // The holder view of `pid`, or null when it holds no GPU device file.
  const HolderView* holder(pid_t pid) const;
  // Whether `p` holds a descriptor of /dev/kfd. Proves nothing alone: a descriptor can be
  // inherited (a forked worker's) or passed over a socket to any process that accepts one.
  static bool holds_kfd(const ProcessInfo& p);
  // ROCm compute on an AMD GPU: `p` holds /dev/kfd and has a KFD context of its own. kfd_open
  // creates the context for the opener (kfd_create_process(current)), and the kernel names its
  // directory by the leader's PID in the initial PID namespace (kfd_process.c, "%d" of
  // lead_thread->pid), keeping it while any descriptor of that /dev/kfd file is left. So a
  // process handed a descriptor has none, a worker that inherited one has none (its job's root
  // has), and in a child PID namespace nothing here can be matched: there this is never true.
  // A render or card node proves nothing: a desktop, a browser and a compositor hold those.
  bool rocm_compute(const ProcessInfo& p) const;
  // Whether the KFD context listed under `pid` is that process's: rocm_compute of it.
  bool owns_kfd_context(pid_t pid) const;
  // The nearest ancestor of `p` that is rocm_compute (the root of the ROCm job `p` was forked
  // in); 0 when none is.
  pid_t rocm_ancestor(const ProcessInfo& p) const;
  // Whether the KFD context listed under `kfd_pid` has outlived its process: that PID is gone, a
  // zombie, or now a process (whose descriptors we read) holding no /dev/kfd. The kernel keeps
  // the context while any descriptor of its /dev/kfd file is left (a forked worker's). Never true
  // in a child PID namespace, whose PIDs are not the ones KFD names.
  bool kfd_context_outlived_owner(pid_t kfd_pid) const;
  // The ROCm job root (its KFD directory's PID) whose outlived context `p` holds, or 0. Proof from
  // the kernel alone: `p` holds /dev/kfd and a DRM client whose pasid is the context's. KFD takes
  // the VM of the job's render-node file (kfd_ioctl_acquire_vm) and amdgpu's fdinfo shows that
  // VM's pasid, as the KFD directory does; a render file reaches another process only by
  // inheritance or by the job passing it. So `p` is the job's, and keeps its memory.
  pid_t held_kfd_context(const ProcessInfo& p) const;
  // The processes for which held_kfd_context is `kfd_pid`, by PID.
  std::vector<pid_t> kfd_context_holders(pid_t kfd_pid) const;
  // The device memory `pid` holds on each AMD or Intel GPU (drm::device_memory_of_process),
  // its KFD context read only when it owns it.
  std::map<std::string, std::uint64_t> drm_memory_of(pid_t pid) const;
};

// The part of the orphan proof that needs no driver listing (ROCm's KFD processes use it too):
// its process-group leader is gone (and it leads no group itself), or its session leader is gone
// (and it leads no session: a service or login started its own job). A leader that is a zombie
// counts as gone; PID 0 (outside this PID namespace) never does. Sets *leader when not None.
OrphanEvidence gone_leader_evidence(const Snapshot& snapshot, const ProcessInfo& process, pid_t* leader);

struct SnapshotOptions {
  ProcScanOptions proc;  // proc_root, dev_dir (from GPUREAP_DEV_DIR by default)
  std::string sysfs_root = "/sys";  // DRM devices and KFD (GPUREAP_SYS_DIR for tests)
  // Where DRM descriptors' <pid>/fdinfo/<fd> are read: proc.proc_root when empty
  // (GPUREAP_FDINFO_DIR for tests: the simulator's processes hold plain files, whose fdinfo has
  // no DRM keys).
  std::string fdinfo_root;
  // Takes in the Holders scope (watch, export, top) keep the holders from the kernel's events
  // and walk /proc only to reconcile (snapshot/holder_events.hpp), shared by every source made
  // from these options. Null: every take walks, as one-shot commands (ps, doctor) do: a set is
  // worth keeping only across takes.
  std::shared_ptr<HolderEvents> holder_events;
};

SnapshotOptions default_snapshot_options();  // honours GPUREAP_DEV_DIR, GPUREAP_SYS_DIR, GPUREAP_FDINFO_DIR

// Keeps the NVML library loaded between snapshots (watch mode re-reads without re-loading).
class SnapshotSource {
 public:
  explicit SnapshotSource(SnapshotOptions options);
  ~SnapshotSource();
  SnapshotSource(const SnapshotSource&) = delete;
  SnapshotSource& operator=(const SnapshotSource&) = delete;

  std::unique_ptr<Snapshot> take();
  // The same with another /proc scope than the options' (watch: its periodic rescans read what
  // ps reads, and the snapshot it acts on reads every process, as kill does).
  std::unique_ptr<Snapshot> take(ProcScanScope scope);
  // Whether the library loaded (tried on the first take or read; false before that).
  bool driver_loaded() const { return load_ && load_->library; }
  // The driver's view alone (no /proc scan) through the library already loaded, for callers
  // that poll it (kill's verification); nullopt when no library is loaded.
  std::optional<DriverReading> read_driver_only(DriverReadScope scope = DriverReadScope::Everything,
                                               const DriverReading* previous = nullptr) const;
  // With holder_events: whether the holders differ from the last take's (the events read now).
  // False without events.
  bool holders_changed();
  // The DRM side alone (sysfs, the fdinfo of every process holding a DRM node, KFD processes),
  // for kill's verification on AMD and Intel GPUs; nullopt when /proc cannot be scanned.
  std::optional<drm::DrmReading> read_drm_only() const;

 private:
  const NvmlLoadResult& loaded() const;

  SnapshotOptions options_;
  // Loaded on first use, on take()'s driver thread: nvmlInit overlaps the /proc scan.
  mutable std::optional<NvmlLoadResult> load_;
};

// Unattributed memory up to this is the driver's own per-context overhead, not something to
// explain: 64 MiB + 16 MiB per listed process. Measured on an H200 (driver 580): 8.8 MiB
// beside one 2.6 GiB process.
std::uint64_t overhead_tolerance_bytes(std::size_t listed_processes);

// With v1 figures (drivers before R510) "used" includes the driver's own reservation, whose
// size is not reported. Allowed for it: 1 GiB, or 2% of the GPU's memory when that is more
// (v2 drivers report a few hundred MiB reserved on current GPUs). 0 when v2 reports it: v2's
// "used" excludes the reservation (total = reserved + used + free).
std::uint64_t reservation_allowance_bytes(const GpuView& gpu);

// The join itself, separated so it can be tested on hand-made readings and tables.
void join_snapshot(Snapshot& snapshot, const DriverReading& reading);

}  // namespace gpureap
