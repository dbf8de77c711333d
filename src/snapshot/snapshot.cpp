#include "snapshot/snapshot.hpp"
#include "snapshot/nvidia_presence.hpp"

#include "snapshot/mps_roles.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <exception>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_set>

#include <fmt/format.h>

namespace gpureap {
namespace {

bool holds_any_gpu_file(const ProcessInfo& process) {
  return std::any_of(process.device_files.begin(), process.device_files.end(),
                     [](const DeviceFileHandle& f) { return f.kind == DeviceFileKind::Gpu; });
}

void classify_identity(GpuProcessView& view, const GpuView& gpu, const Snapshot& snapshot) {
  const ProcessInfo* process = snapshot.table.find(static_cast<pid_t>(view.driver.pid));
  view.linux_process = process;
  if (process == nullptr) {
    view.identity = Identity::Foreign;
    view.identity_reason =
        snapshot.in_child_pid_namespace
            ? "the driver reports host PIDs and gpureap runs in a PID namespace (container) "
              "without the host's: run it on the host or with --pid=host"
            : "no process with this PID here: it runs in another PID namespace, or has exited";
    return;
  }
  const auto& types = view.driver.types;
  if (types.mps && !types.compute && !types.graphics) {
    view.identity = Identity::Unverified;
    view.identity_reason = "MPS client: its GPU work runs through the MPS server, which holds the device files";
    return;
  }
  if (process->fd_access == FdAccess::Denied) {
    view.identity = Identity::Unverified;
    view.identity_reason = fmt::format(
        "cannot read /proc/{}/fd to check its GPU descriptors: run as root or as {}", process->pid,
        process->user);
    return;
  }
  const auto minor = gpu.reading.minor_number;
  const bool holds = minor ? process->holds_gpu_minor(static_cast<int>(*minor)) : holds_any_gpu_file(*process);
  if (holds && !process->kernel_thread) {
    view.identity = Identity::Ok;
    return;
  }
  view.identity = Identity::Mismatch;
  view.identity_reason = fmt::format(
      "PID {} here ({}) holds no descriptor of {}: it is not the process the driver means "
      "(another PID namespace, or the PID was reused)",
      process->pid, process->command(),
      minor ? fmt::format("/dev/nvidia{}", *minor) : std::string("any GPU device file"));
}

// On the host, a listed PID that no longer exists while processes it forked still hold the
// GPU: the driver keeps listing a context under its creator for as long as it lives. Its
// holders are those in the dead PID's process group or session (a job's workers inherit both);
// failing that, when it is the only such PID on the GPU, the orphans holding that GPU.
void link_exited_owners(Snapshot& snapshot) {
  if (snapshot.in_child_pid_namespace) return;
  for (auto& gpu : snapshot.gpus) {
    const unsigned index = gpu.reading.index;
    std::size_t exited_here = 0;
    for (const auto& p : snapshot.processes) {
      if (p.gpu_index == index && p.linux_process == nullptr) ++exited_here;
    }
    for (auto& p : snapshot.processes) {
      if (p.gpu_index != index || p.linux_process != nullptr) continue;
      const auto dead = static_cast<pid_t>(p.driver.pid);
      std::vector<HolderView*> by_group, orphans;
      for (auto& h : snapshot.holders) {
        if (h.listed_by_driver || h.role == HolderRole::Client || !h.holds_gpu(index)) {
          continue;
        }
        if (h.linux_process->pgid == dead || h.linux_process->session == dead) by_group.push_back(&h);
        if (h.role == HolderRole::Orphan) orphans.push_back(&h);
      }
      const auto& holders = !by_group.empty() ? by_group : (exited_here == 1 ? orphans : by_group);
      if (holders.empty()) continue;
      std::string list;
      for (HolderView* h : holders) {
        p.held_by.push_back(h->pid);
        h->context_of = dead;
        list += (list.empty() ? "" : ", ") + std::to_string(h->pid);
      }
      p.identity_reason = fmt::format(
          "exited; the driver still lists it because PID {} inherited its descriptors and keeps its "
          "context (and memory) alive: end {} to free it",
          list, holders.size() == 1 ? "that process" : "those processes");
      gpu.memory.held_for_exited += p.driver.used_memory.value_or(0);
    }
  }
}

// In a child PID namespace the driver's PIDs are the host's: a container's own GPU process is
// `foreign` to gpureap running in it. What explains such an entry here is who holds the GPU's
// device file: those holders are named beside it.
void name_holders_here(Snapshot& snapshot) {
  if (!snapshot.in_child_pid_namespace) return;
  for (auto& p : snapshot.processes) {
    if (p.identity != Identity::Foreign) continue;
    std::string list;
    for (const auto& h : snapshot.holders) {
      if (h.listed_by_driver || h.role == HolderRole::Client || !h.holds_gpu(p.gpu_index)) continue;
      p.holders_here.push_back(h.pid);
      list += (list.empty() ? "" : ", ") + std::to_string(h.pid);
    }
    if (list.empty()) continue;
    p.identity_reason = fmt::format(
        "the driver reports host PIDs and gpureap runs in a PID namespace (container) without the "
        "host's; here PID {} hold{} this GPU's device file: its process may be among them, or in "
        "another container (run gpureap on the host or with --pid=host to know)",
        list, p.holders_here.size() == 1 ? "s" : "");
  }
}

// A leader that is gone, or dead but not yet reaped, no longer runs the job. PID 0 is a leader
// outside our PID namespace: unknown, so never evidence.
bool leader_gone(const Snapshot& snapshot, pid_t leader) {
  if (leader <= 0) return false;
  const ProcessInfo* process = snapshot.table.find(leader);
  return process == nullptr || process->state == 'Z';
}

// Positive evidence that the job which forked this holder is over; PPID 1 is none (every
// service has it). A session leader (pid == session: a service, a login, a setsid'd daemon)
// started its own job, so a gone leader says nothing about it.
bool find_orphan_evidence(const Snapshot& snapshot, const std::unordered_set<pid_t>& exited_listed,
                          const ProcessInfo& process, HolderView& holder) {
  const pid_t pid = process.pid;
  const auto found = [&holder](OrphanEvidence evidence, pid_t leader) {
    holder.orphan_evidence = evidence;
    holder.evidence_pids = {leader};
    return true;
  };
  if (process.pgid > 0 && process.pgid != pid && exited_listed.count(process.pgid)) {
    return found(OrphanEvidence::ExitedListedGroupLeader, process.pgid);
  }
  if (process.session > 0 && process.session != pid && exited_listed.count(process.session)) {
    return found(OrphanEvidence::ExitedListedSessionLeader, process.session);
  }
  pid_t leader = 0;
  const OrphanEvidence gone = gone_leader_evidence(snapshot, process, &leader);
  return gone != OrphanEvidence::None && found(gone, leader);
}


// One view per GPU the driver read, with its memory account.
void add_gpu_views(Snapshot& snapshot, const DriverReading& reading) {
  for (const auto& gpu_reading : reading.gpus) {
    GpuView gpu;
    gpu.reading = gpu_reading;
    const auto& m = gpu_reading.memory;
    gpu.memory.total = m.total;
    gpu.memory.used = m.used;
    gpu.memory.reserved = m.reserved;
    gpu.memory.free = m.free;
    gpu.memory.source = m.source;
    snapshot.gpus.push_back(std::move(gpu));
  }
}

// The driver's processes of each GPU, their identity here, and the GPU's memory they account
// for (what is unattributed only when every listed process said its memory). The PIDs listed.
std::unordered_set<pid_t> add_driver_processes(Snapshot& snapshot) {
  std::unordered_set<pid_t> listed;
  for (auto& gpu : snapshot.gpus) {
    bool all_known = gpu.reading.processes_complete;
    std::uint64_t attributed = 0;
    for (const auto& driver_process : gpu.reading.processes) {
      GpuProcessView view;
      view.gpu_index = gpu.reading.index;
      view.driver = driver_process;
      classify_identity(view, gpu, snapshot);
      if (driver_process.used_memory) {
        attributed += *driver_process.used_memory;
      } else {
        all_known = false;
      }
      listed.insert(static_cast<pid_t>(driver_process.pid));
      snapshot.processes.push_back(std::move(view));
    }
    auto& account = gpu.memory;
    account.attributed = attributed;
    if (account.used && all_known) {
      account.unattributed = *account.used > attributed ? *account.used - attributed : 0;
    }
  }
  return listed;
}

// Listed PIDs that do not exist here: exited jobs (on the host; in a child PID namespace the
// driver's PIDs are the host's and prove nothing here).
std::unordered_set<pid_t> exited_listed_pids(const Snapshot& snapshot) {
  std::unordered_set<pid_t> exited_listed;
  if (!snapshot.in_child_pid_namespace) {
    for (const auto& p : snapshot.processes) {
      if (p.linux_process == nullptr) exited_listed.insert(static_cast<pid_t>(p.driver.pid));
    }
  }
  return exited_listed;
}

// A process holding device files as a holder: its GPUs, its ancestry, and its role.
HolderView holder_view(const Snapshot& snapshot, const ProcessInfo& process, const std::unordered_set<pid_t>& listed,
                       const std::unordered_set<pid_t>& exited_listed) {
  const pid_t pid = process.pid;
  HolderView holder;
  holder.pid = pid;
  holder.linux_process = &process;
  std::set<unsigned> gpus;
  for (const auto& file : process.device_files) {
    if (file.kind != DeviceFileKind::Gpu || file.minor < 0) continue;
    if (const GpuView* gpu = snapshot.gpu_by_minor(static_cast<unsigned>(file.minor))) {
      gpus.insert(gpu->reading.index);
    }
  }
  holder.gpus.assign(gpus.begin(), gpus.end());
  holder.listed_by_driver = listed.count(pid) > 0;
  auto chain = snapshot.table.ancestry(pid);
  if (!chain.empty() && chain.front() == pid) chain.erase(chain.begin());
  holder.ancestry = chain;
  for (pid_t ancestor : holder.ancestry) {
    if (listed.count(ancestor)) {
      holder.listed_ancestor = ancestor;
      break;
    }
  }
  if (holder.listed_by_driver) {
    holder.role = HolderRole::GpuProcess;
  } else if (!holds_any_gpu_file(process) || process.maps_nvml_only == true) {
    // Control/UVM files only, or the NVML library mapped without CUDA: a monitor,
    // exporter or nvidia-smi. It holds no GPU memory but does block a GPU reset.
    holder.role = HolderRole::Client;
  } else if (holder.listed_ancestor) {
    holder.role = HolderRole::Worker;
  } else if (find_orphan_evidence(snapshot, exited_listed, process, holder)) {
    holder.role = HolderRole::Orphan;
  } else {
    holder.role = HolderRole::Unlisted;
  }
  return holder;
}

}  // namespace

OrphanEvidence gone_leader_evidence(const Snapshot& snapshot, const ProcessInfo& process, pid_t* leader) {
  const pid_t pid = process.pid;
  if (process.session == pid) return OrphanEvidence::None;
  if (process.pgid != pid && leader_gone(snapshot, process.pgid)) {
    *leader = process.pgid;
    return OrphanEvidence::GroupLeaderGone;
  }
  if (leader_gone(snapshot, process.session)) {
    *leader = process.session;
    return OrphanEvidence::SessionLeaderGone;
  }
  return OrphanEvidence::None;
}

std::string_view holder_role_name(HolderRole role) {
  switch (role) {
    case HolderRole::GpuProcess: return "gpu-process";
    case HolderRole::Worker: return "worker";
    case HolderRole::Orphan: return "orphan";
    case HolderRole::Client: return "client";
    case HolderRole::Unlisted: return "unlisted";
  }
  return "unlisted";
}

std::string_view orphan_evidence_name(OrphanEvidence evidence) {
  switch (evidence) {
    case OrphanEvidence::None: return "none";
    case OrphanEvidence::ExitedListedGroupLeader: return "exited-listed-group-leader";
    case OrphanEvidence::ExitedListedSessionLeader: return "exited-listed-session-leader";
    case OrphanEvidence::GroupLeaderGone: return "group-leader-gone";
    case OrphanEvidence::SessionLeaderGone: return "session-leader-gone";
  }
  return "none";
}

std::uint64_t overhead_tolerance_bytes(std::size_t listed_processes) {
  return (64ull << 20) + (16ull << 20) * listed_processes;
}

std::uint64_t reservation_allowance_bytes(const GpuView& gpu) {
  if (gpu.memory.reserved) return 0;
  return std::max<std::uint64_t>(1ull << 30, gpu.memory.total.value_or(0) / 50);
}

std::string identity_name(Identity identity) {
  switch (identity) {
    case Identity::Ok: return "ok";
    case Identity::Foreign: return "foreign";
    case Identity::Mismatch: return "mismatch";
    case Identity::Unverified: return "unverified";
  }
  return "unverified";
}

const GpuView* Snapshot::gpu_by_minor(unsigned minor) const {
  for (const auto& gpu : gpus) {
    if (gpu.reading.minor_number == minor) return &gpu;
  }
  return nullptr;
}

const GpuView* Snapshot::gpu_by_index(unsigned index) const {
  for (const auto& gpu : gpus) {
    if (gpu.reading.index == index) return &gpu;
  }
  return nullptr;
}

bool Snapshot::lists(pid_t pid) const {
  return std::any_of(processes.begin(), processes.end(),
                     [pid](const GpuProcessView& p) { return static_cast<pid_t>(p.driver.pid) == pid; });
}

const HolderView* Snapshot::holder(pid_t pid) const {
  for (const auto& h : holders) {
    if (h.pid == pid) return &h;
  }
  return nullptr;
}

bool Snapshot::holds_kfd(const ProcessInfo& p) {
  return std::any_of(p.drm_files.begin(), p.drm_files.end(),
                     [](const DeviceFileHandle& f) { return f.kind == DeviceFileKind::Kfd; });
}

bool Snapshot::rocm_compute(const ProcessInfo& p) const {
  if (in_child_pid_namespace || !holds_kfd(p)) return false;
  return std::any_of(drm.kfd_processes.begin(), drm.kfd_processes.end(),
                     [&](const drm::KfdProcess& k) { return k.pid == p.pid; });
}

bool Snapshot::owns_kfd_context(pid_t pid) const {
  const ProcessInfo* p = table.find(pid);
  return p != nullptr && rocm_compute(*p);
}

pid_t Snapshot::rocm_ancestor(const ProcessInfo& p) const {
  const auto chain = table.ancestry(p.pid);
  for (auto up = chain.begin() + 1; up != chain.end() && *up > 1; ++up) {
    const ProcessInfo* parent = table.find(*up);
    if (parent == nullptr) return 0;
    if (rocm_compute(*parent)) return *up;
  }
  return 0;
}

bool Snapshot::kfd_context_outlived_owner(pid_t kfd_pid) const {
  if (in_child_pid_namespace) return false;
  const ProcessInfo* owner = table.find(kfd_pid);
  if (owner == nullptr || owner->state == 'Z') return true;
  return owner->fd_access == FdAccess::Ok && !holds_kfd(*owner);
}

pid_t Snapshot::held_kfd_context(const ProcessInfo& p) const {
  if (!holds_kfd(p) || rocm_compute(p)) return 0;
  const auto held = drm.clients.clients_held_by(p.pid);
  for (const auto& kfd : drm.kfd_processes) {
    if (kfd.pid == p.pid || !kfd.pasid || *kfd.pasid == 0) continue;
    const bool holds_its_vm = std::any_of(held.begin(), held.end(), [&](const drm::DrmClient* c) {
      return c->stats.pasid && *c->stats.pasid == *kfd.pasid;
    });
    if (holds_its_vm && kfd_context_outlived_owner(kfd.pid)) return kfd.pid;
  }
  return 0;
}

std::vector<pid_t> Snapshot::kfd_context_holders(pid_t kfd_pid) const {
  std::vector<pid_t> out;
  if (!kfd_context_outlived_owner(kfd_pid)) return out;
  for (const auto& [pid, info] : table.processes()) {
    if (info.state != 'Z' && !info.kernel_thread && held_kfd_context(info) == kfd_pid) out.push_back(pid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::string, std::uint64_t> Snapshot::drm_memory_of(pid_t pid) const {
  return drm::device_memory_of_process(drm, pid, owns_kfd_context(pid));
}

SnapshotOptions default_snapshot_options() {
  SnapshotOptions options;
  if (const char* dev = std::getenv("GPUREAP_DEV_DIR"); dev != nullptr && dev[0] != '\0') {
    // Descriptor links name canonical absolute paths: compare against the same form.
    char resolved[PATH_MAX];
    options.proc.dev_dir = realpath(dev, resolved) != nullptr ? resolved : dev;
  }
  if (const char* sys = std::getenv("GPUREAP_SYS_DIR"); sys != nullptr && sys[0] != '\0') options.sysfs_root = sys;
  if (const char* fdinfo = std::getenv("GPUREAP_FDINFO_DIR"); fdinfo != nullptr && fdinfo[0] != '\0') {
    options.fdinfo_root = fdinfo;
  }
  return options;
}

void join_snapshot(Snapshot& snapshot, const DriverReading& reading) {
  snapshot.gpus.clear();
  snapshot.processes.clear();
  snapshot.holders.clear();
  add_gpu_views(snapshot, reading);
  const std::unordered_set<pid_t> listed = add_driver_processes(snapshot);
  const std::unordered_set<pid_t> exited_listed = exited_listed_pids(snapshot);
  snapshot.processes_not_inspected = 0;
  for (const auto& [pid, process] : snapshot.table.processes()) {
    if (process.fd_access == FdAccess::Denied && !process.kernel_thread) ++snapshot.processes_not_inspected;
    if (!process.holds_any_device_file()) continue;
    // gpureap itself holds them once NVML is loaded (the driver's library opens nvidiactl
    // and nvidia<N>), like any NVML client; it is not a holder anyone wants to see.
    if (pid == snapshot.self_pid) continue;
    snapshot.holders.push_back(holder_view(snapshot, process, listed, exited_listed));
  }
  std::sort(snapshot.holders.begin(), snapshot.holders.end(),
            [](const HolderView& a, const HolderView& b) { return a.pid < b.pid; });
  link_exited_owners(snapshot);
  name_holders_here(snapshot);
}

SnapshotSource::SnapshotSource(SnapshotOptions options) : options_(std::move(options)) {}

SnapshotSource::~SnapshotSource() = default;

const NvmlLoadResult& SnapshotSource::loaded() const {
  if (!load_) load_ = NvmlLibrary::load();
  return *load_;
}

std::optional<DriverReading> SnapshotSource::read_driver_only(DriverReadScope scope,
                                                             const DriverReading* previous) const {
  if (!loaded().library) return std::nullopt;
  return read_driver(*load_->library, scope, previous);
}

std::unique_ptr<Snapshot> SnapshotSource::take() { return take(options_.proc.scope); }

std::unique_ptr<Snapshot> SnapshotSource::take(ProcScanScope scope) {
  ProcScanOptions proc = options_.proc;
  proc.scope = scope;
  HolderEvents* events = scope == ProcScanScope::Holders ? options_.holder_events.get() : nullptr;
  if (events != nullptr) {
    proc.only_pids = events->before_scan(proc);
    if (!proc.memory) proc.memory = events->details_memory();
  }
  auto snapshot = std::make_unique<Snapshot>();
  snapshot->taken_at = std::chrono::system_clock::now();
  // The driver (loaded on the first take) is read on a second thread while this one scans
  // /proc: both spend their time in the kernel (NVML's ioctls, procfs), and nvmlInit alone can
  // take seconds on a GPU without persistence mode. A driver-listed PID the scan missed is read
  // by load_trees below, as one that started after the scan always was.
  std::optional<DriverReading> reading;
  std::exception_ptr driver_error;
  const auto read = [&]() noexcept {
    try {
      reading = read_driver_only();
    } catch (...) {
      driver_error = std::current_exception();
    }
  };
  {
    std::jthread driver_thread;
    try {
      driver_thread = std::jthread(read);
    } catch (const std::system_error&) {
      read();  // no thread to be had (RLIMIT_NPROC): one after the other
    }
    snapshot->table = ProcessTable::scan(proc);
  }  // joins the driver thread, also when the scan throws
  if (events != nullptr) {
    if (!proc.only_pids) events->after_walk(snapshot->table);
    snapshot->holder_events = events->state();
  }
  if (driver_error) std::rethrow_exception(driver_error);

  DriverStatus& driver = snapshot->driver;
  driver.failure = load_->failure;
  driver.nvml_code = load_->nvml_code;
  driver.message = load_->message;
  if (reading) {
    driver.loaded = true;
    driver.library_path = reading->library_path;
    driver.driver_version = reading->driver_version;
    driver.nvml_version = reading->nvml_version;
    driver.cuda_driver_version = reading->cuda_driver_version;
    driver.count_error = reading->error;
  } else {
    reading.emplace();
    driver.nvidia_hardware = nvidia_hardware_evidence(proc.dev_dir, options_.sysfs_root, proc.proc_root);
  }
  snapshot->in_child_pid_namespace = snapshot->table.in_child_pid_namespace();

  // Details for every driver-listed PID present here and the descendants of each (for --tree).
  std::vector<pid_t> listed;
  for (const auto& gpu : reading->gpus) {
    for (const auto& process : gpu.processes) listed.push_back(static_cast<pid_t>(process.pid));
  }
  snapshot->table.load_trees(listed);
  join_snapshot(*snapshot, *reading);
  attribute_mps(*snapshot, read_socket_view(*snapshot, proc.proc_root));
  snapshot->drm = drm::read_drm(
      {options_.sysfs_root, options_.fdinfo_root.empty() ? proc.proc_root : options_.fdinfo_root}, snapshot->table);
  return snapshot;
}

const MpsControlDaemon* Snapshot::mps_daemon(pid_t pid) const {
  for (const auto& daemon : mps_daemons) {
    if (daemon.pid == pid) return &daemon;
  }
  return nullptr;
}

bool SnapshotSource::holders_changed() {
  return options_.holder_events != nullptr && options_.holder_events->changed_since_scan();
}

std::optional<drm::DrmReading> SnapshotSource::read_drm_only() const {
  ProcScanOptions proc = options_.proc;
  proc.scope = ProcScanScope::Holders;
  proc.memory = nullptr;  // a walk of its own: neither the memory nor the events' set
  try {
    const ProcessTable table = ProcessTable::scan(proc);
    return drm::read_drm({options_.sysfs_root, options_.fdinfo_root.empty() ? proc.proc_root : options_.fdinfo_root},
                         table);
  } catch (const std::system_error&) {
    return std::nullopt;
  }
}

}  // namespace gpureap
