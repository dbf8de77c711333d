#include "kill/kill_plan.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "kill/mps_client_ending.hpp"
#include "proc/parse_util.hpp"
#include "proc/proc_io.hpp"

namespace gpureap {
namespace {

// CAP_KILL (bit 5) in our effective capability set: signals anyone, like root.
bool has_cap_kill() {
  procfs::ReadBuffer buffer;
  const auto text = buffer.read_proc_file_at(AT_FDCWD, "/proc/self/status");
  if (!text) return false;
  std::string_view rest = *text;
  while (!rest.empty()) {
    std::string_view line = procfs::take_line(rest);
    if (!line.starts_with("CapEff:")) continue;
    line.remove_prefix(7);
    procfs::skip_spaces(line);
    std::uint64_t caps = 0;
    const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), caps, 16);
    return error == std::errc() && end == line.data() + line.size() && (caps & (1ull << 5)) != 0;
  }
  return false;
}



std::string stop_container_hint(const ProcessInfo* process) {
  if (process == nullptr || !process->container || process->container->id.empty()) {
    return "run gpureap on the host or with --pid=host, or stop the container that runs it";
  }
  const auto& c = *process->container;
  const std::string id = c.id.substr(0, 12);
  if (c.runtime == "docker") return "run gpureap on the host or with --pid=host, or stop the container: docker stop " + id;
  if (c.runtime == "podman") return "run gpureap on the host or with --pid=host, or stop the container: podman stop " + id;
  if (c.runtime == "kubernetes" && !c.pod_uid.empty()) {
    return "run gpureap on the host or with --pid=host, or delete the pod (UID " + c.pod_uid + ")";
  }
  return "run gpureap on the host or with --pid=host, or stop the container (" + c.runtime + " " + id + ")";
}

void apply_identity(PlannedTarget& target, const Snapshot& snapshot) {
  for (const auto& view : snapshot.processes) {
    if (static_cast<pid_t>(view.driver.pid) != target.pid) continue;
    if (view.identity == Identity::Foreign) {
      target.refusal = Refusal::Foreign;
      target.refusal_text = fmt::format(
          "identity foreign: the driver lists PID {} on GPU {} but no such process exists in this PID "
          "namespace (the driver reports host PIDs); {}",
          target.pid, view.gpu_index, stop_container_hint(nullptr));
      return;
    }
    if (view.identity == Identity::Mismatch) {
      target.refusal = Refusal::Mismatch;
      target.refusal_text = fmt::format(
          "identity mismatch: PID {} here ({}) holds no descriptor of GPU {}: it is not the process the "
          "driver means, and signalling it would hit a stranger; {}",
          target.pid, target.command, view.gpu_index, stop_container_hint(nullptr));
      return;
    }
    if (view.identity == Identity::Unverified && snapshot.in_child_pid_namespace && !view.driver.types.mps) {
      target.refusal = Refusal::Unverifiable;
      target.refusal_text = fmt::format(
          "cannot verify that PID {} here is the GPU process: gpureap runs in a PID namespace and may not "
          "read its descriptors; {}",
          target.pid, stop_container_hint(view.linux_process));
      return;
    }
  }
}

void apply_policy(PlannedTarget& target, const ProcessInfo* process, const Snapshot& snapshot,
                  const PlanPolicy& policy) {
  if (target.pid <= 1) {
    target.refusal = Refusal::PidOneOrLess;
    target.refusal_text = fmt::format("PID {} is {}: never signalled", target.pid,
                                      target.pid == 1 ? "init (ending it ends the system or container)" : "not a process");
    return;
  }
  if (target.pid == policy.self) {
    target.refusal = Refusal::Self;
    target.refusal_text = "this is gpureap itself";
    return;
  }
  if (std::find(policy.self_ancestry.begin(), policy.self_ancestry.end(), target.pid) != policy.self_ancestry.end()) {
    target.refusal = Refusal::Ancestor;
    target.refusal_text = fmt::format(
        "PID {} is an ancestor of gpureap (the shell or job running it): ending it would end this command; "
        "run gpureap from another session",
        target.pid);
    return;
  }
  if (process != nullptr && process->kernel_thread) {
    target.refusal = Refusal::KernelThread;
    target.refusal_text = "kernel thread: signals do not end it";
    return;
  }
  apply_identity(target, snapshot);
  if (target.refusal != Refusal::None) return;
  if (process != nullptr && !policy.force) {
    if (const auto pattern = policy.protect.match(*process)) {
      target.refusal = Refusal::Protected;
      target.refusal_text = fmt::format(
          "protected process ({} matches '{}': a display server, driver daemon or GPU monitor; ending it takes "
          "down a desktop or the node's monitoring and frees little): add --force if you really mean it",
          process->comm, *pattern);
    }
  }
}

}  // namespace

std::string permission_denied_text(pid_t pid, const std::string& user, uid_t uid) {
  const std::string who = uid == 0 ? std::string("root") : fmt::format("root or {}", user);
  return fmt::format("permission denied: PID {} belongs to {} (uid {}); signalling it needs {}", pid, user, uid, who);
}

namespace {

void check_permission(PlannedTarget& target, const ProcessInfo* process, const PlanPolicy& policy) {
  if (!target.present || !target.uid || process == nullptr || may_signal(*process, policy)) return;
  target.permission_denied = true;
  target.permission_text = permission_denied_text(target.pid, target.user, *target.uid) + " (run with sudo)";
}

// MPS: a client carries its server (and that server's control daemon) for terminate_client.
// A server is ended only when selected itself, and only with every client it serves ending in
// the same plan: signalling it ends the work of all of them. The control daemon, or a server,
// reached through a tree or a process group is never signalled. Only proven roles count
// (snapshot/mps_roles.hpp): a process merely named like MPS is an ordinary holder.
void apply_mps(KillPlan& plan, const Snapshot& snapshot) {
  auto actionable_target = [&](pid_t pid) {
    return std::any_of(plan.targets.begin(), plan.targets.end(),
                       [&](const PlannedTarget& t) { return t.pid == pid && t.actionable(); });
  };
  for (auto& target : plan.targets) {
    for (const auto& view : snapshot.processes) {
      if (static_cast<pid_t>(view.driver.pid) != target.pid) continue;
      if (view.mps_role == MpsRole::Server) target.mps_server_role = true;
    }
    if (const auto link = find_mps_client(snapshot, target.pid)) {
      target.mps_client = true;
      target.mps_link = *link;
    }
  }
  for (auto& target : plan.targets) {
    if (target.refusal != Refusal::None) continue;
    if ((target.mps_server_role || snapshot.mps_daemon(target.pid) != nullptr) && target.via) {
      target.refusal = Refusal::MpsServer;
      target.refusal_text = fmt::format(
          "PID {} is an MPS server or control daemon reached through PID {}'s tree or group: it is never ended as "
          "a side effect (ending it ends the GPU work of every client it serves); select it itself to end it",
          target.pid, *target.via);
      continue;
    }
    if (!target.mps_server_role) continue;
    std::vector<pid_t> kept = mps_clients_served_by(snapshot, target.pid, false);
    std::erase_if(kept, actionable_target);
    if (kept.empty()) continue;
    target.refusal = Refusal::MpsServer;
    target.refusal_text = fmt::format(
        "MPS server {} serves clients that are not being ended: {}; ending the server ends their GPU work "
        "too: end those clients first (gpureap kill ends a client through terminate_client)",
        target.pid, pids_with_users(snapshot, kept));
  }
}

// A refused target is never replaced by its tree or group: `kill 1` must not become "every
// process on the host", nor a protected launcher "its GPU children". Expansions carry the
// target they were added for (`via`), which always comes earlier in the plan; a descendant is
// also dropped when a refused target sits between it and that root.
void drop_expansions_of_refused(KillPlan& plan, const Snapshot& snapshot) {
  std::set<pid_t> not_expanded;  // refused, denied, or dropped themselves
  std::vector<PlannedTarget> kept;
  for (auto& target : plan.targets) {
    bool dropped = target.via && not_expanded.count(*target.via) > 0;
    if (!dropped && target.via && !target.by_group) {
      const auto chain = snapshot.table.ancestry(target.pid);
      for (auto up = chain.begin() + 1; up != chain.end() && *up != *target.via && *up > 1; ++up) {
        if (snapshot.table.find(*up) == nullptr) break;
        if (not_expanded.count(*up)) {
          dropped = true;
          break;
        }
      }
    }
    if (dropped || target.refusal != Refusal::None || target.permission_denied) not_expanded.insert(target.pid);
    if (!dropped) kept.push_back(std::move(target));
  }
  plan.targets = std::move(kept);
}

// What the snapshot says of a selected process: its identity, owner, family and GPU files.
void copy_process_facts(PlannedTarget& target, const ProcessInfo& process, const Snapshot& snapshot) {
  target.start_time_ticks = process.start_time_ticks;
  if (process.details_loaded) {
    target.uid = process.uid;
    target.user = process.user;
  }
  target.state = process.state;
  target.wchan = process.wchan;
  target.ppid = process.ppid;
  target.pgid = process.pgid;
  target.command = process.command();
  target.container = process.container ? container_words(*process.container) : std::string();
  if (process.container) target.container_id = process.container->id;
  std::set<unsigned> holds;
  for (const auto& f : process.device_files) {
    if (f.kind != DeviceFileKind::Gpu || f.minor < 0) continue;
    if (const GpuView* gpu = snapshot.gpu_by_minor(static_cast<unsigned>(f.minor))) holds.insert(gpu->reading.index);
  }
  target.holds_gpus.assign(holds.begin(), holds.end());
}

// The driver's memory per GPU for the target; a listing without a figure marks it unknown.
void copy_driver_memory(PlannedTarget& target, const Snapshot& snapshot) {
  for (const auto& view : snapshot.processes) {
    if (static_cast<pid_t>(view.driver.pid) != target.pid) continue;
    if (view.driver.used_memory) {
      target.gpu_memory[view.gpu_index] += *view.driver.used_memory;
    } else {
      target.gpu_memory[view.gpu_index] += 0;
      target.gpu_memory_unknown = true;
    }
  }
}

// One selected process with its facts, then the policy's verdict and, if allowed, the permission check.
PlannedTarget planned_target(const SelectedProcess& selected, const Snapshot& snapshot, const PlanPolicy& policy) {
  PlannedTarget target;
  target.pid = selected.pid;
  target.present = selected.present;
  target.reason = selected.reason;
  target.via = selected.via;
  target.by_group = selected.by_group;
  const ProcessInfo* process = snapshot.table.find(selected.pid);
  if (process != nullptr) copy_process_facts(target, *process, snapshot);
  copy_driver_memory(target, snapshot);
  apply_policy(target, process, snapshot, policy);
  if (target.refusal == Refusal::None) check_permission(target, process, policy);
  return target;
}

bool actionable_target(const KillPlan& plan, pid_t pid) {
  return std::any_of(plan.targets.begin(), plan.targets.end(),
                     [&](const PlannedTarget& t) { return t.pid == pid && t.actionable(); });
}

// Per GPU: what the targets that will be signalled hold and should free.
std::map<unsigned, PlannedGpu> gpus_of_actionable_targets(const KillPlan& plan) {
  std::map<unsigned, PlannedGpu> gpus;
  for (const auto& target : plan.targets) {
    if (!target.actionable()) continue;
    for (const auto& [index, bytes] : target.gpu_memory) {
      auto& gpu = gpus[index];
      gpu.index = index;
      gpu.expected_free_bytes += bytes;
      gpu.target_pids.push_back(target.pid);
    }
    for (unsigned index : target.holds_gpus) {
      auto& gpu = gpus[index];
      gpu.index = index;
      if (std::find(gpu.target_pids.begin(), gpu.target_pids.end(), target.pid) == gpu.target_pids.end()) {
        gpu.target_pids.push_back(target.pid);
      }
    }
  }
  return gpus;
}

// Memory no listed process explains, held by orphaned holders (a killed job's workers):
// when every such holder will be signalled, it should come back too.
void expect_unattributed_freed(PlannedGpu& gpu, const GpuView* view, const KillPlan& plan, const Snapshot& snapshot) {
  bool orphans = false, all_orphans_targeted = true;
  for (const auto& h : snapshot.holders) {
    if (h.role != HolderRole::Orphan && h.role != HolderRole::Unlisted) continue;
    if (!h.holds_gpu(gpu.index)) continue;
    orphans = true;
    if (!actionable_target(plan, h.pid)) all_orphans_targeted = false;
  }
  if (orphans && all_orphans_targeted && view != nullptr && view->memory.unattributed) {
    gpu.orphaned_bytes = *view->memory.unattributed;
    gpu.expected_free_bytes += gpu.orphaned_bytes;
  }
}

// A listed PID that has exited, its context kept alive by holders: freed once all of them end.
// Returns those PIDs.
std::vector<pid_t> expect_exited_freed(PlannedGpu& gpu, const KillPlan& plan, const Snapshot& snapshot) {
  std::vector<pid_t> exited_freed;
  for (const auto& p : snapshot.processes) {
    if (p.gpu_index != gpu.index || p.held_by.empty() || !p.driver.used_memory) continue;
    const bool all_targeted = std::all_of(p.held_by.begin(), p.held_by.end(),
                                          [&](pid_t holder) { return actionable_target(plan, holder); });
    if (!all_targeted) continue;
    gpu.orphaned_bytes += *p.driver.used_memory;
    gpu.expected_free_bytes += *p.driver.used_memory;
    exited_freed.push_back(static_cast<pid_t>(p.driver.pid));
  }
  return exited_freed;
}

// What the other listed processes hold: it stays in use after the kill.
void count_others_listed(PlannedGpu& gpu, const std::vector<pid_t>& exited_freed, const Snapshot& snapshot) {
  for (const auto& p : snapshot.processes) {
    if (p.gpu_index != gpu.index || !p.driver.used_memory) continue;
    if (std::find(exited_freed.begin(), exited_freed.end(), static_cast<pid_t>(p.driver.pid)) != exited_freed.end()) {
      continue;
    }
    if (std::find(gpu.target_pids.begin(), gpu.target_pids.end(), static_cast<pid_t>(p.driver.pid)) !=
        gpu.target_pids.end()) {
      continue;
    }
    gpu.others_listed_bytes += *p.driver.used_memory;
  }
}

// Per GPU: what the targets that will be signalled should free, against the baseline.
void plan_gpus(KillPlan& plan, const Snapshot& snapshot) {
  for (auto& [index, gpu] : gpus_of_actionable_targets(plan)) {
    const GpuView* view = snapshot.gpu_by_index(index);
    if (view != nullptr) gpu.baseline_used = view->memory.used;
    expect_unattributed_freed(gpu, view, plan, snapshot);
    const std::vector<pid_t> exited_freed = expect_exited_freed(gpu, plan, snapshot);
    count_others_listed(gpu, exited_freed, snapshot);
    plan.gpus.push_back(gpu);
  }
}

}  // namespace

std::string refusal_name(Refusal refusal) {
  switch (refusal) {
    case Refusal::None: return "none";
    case Refusal::PidOneOrLess: return "pid-1";
    case Refusal::Self: return "self";
    case Refusal::Ancestor: return "ancestor";
    case Refusal::KernelThread: return "kernel-thread";
    case Refusal::Foreign: return "foreign";
    case Refusal::Mismatch: return "mismatch";
    case Refusal::Unverifiable: return "unverifiable";
    case Refusal::Protected: return "protected";
    case Refusal::MpsServer: return "mps-server";
  }
  return "none";
}

bool may_signal(const ProcessInfo& process, const PlanPolicy& policy) {
  if (policy.can_kill_any) return true;
  for (uid_t sender : {policy.real_uid, policy.effective_uid}) {
    if (sender == process.real_uid || sender == process.saved_uid) return true;
  }
  return false;
}

PlanPolicy PlanPolicy::for_current_process(const Snapshot& snapshot) {
  PlanPolicy policy;
  policy.self = getpid();
  auto chain = snapshot.table.ancestry(policy.self);
  if (!chain.empty() && chain.front() == policy.self) chain.erase(chain.begin());
  policy.self_ancestry = chain;
  // Our parent even when the scan missed it (it may have been filtered or raced).
  if (std::find(chain.begin(), chain.end(), getppid()) == chain.end()) policy.self_ancestry.push_back(getppid());
  policy.real_uid = getuid();
  policy.effective_uid = geteuid();
  policy.can_kill_any = policy.effective_uid == 0 || has_cap_kill();
  return policy;
}

KillPlan build_plan(const Snapshot& snapshot, const Selection& selection, const PlanPolicy& policy) {
  KillPlan plan;
  plan.missing = selection.missing;
  for (const auto& selected : selection.processes) plan.targets.push_back(planned_target(selected, snapshot, policy));
  apply_mps(plan, snapshot);
  drop_expansions_of_refused(plan, snapshot);
  plan_gpus(plan, snapshot);
  plan_drm_gpus(plan, snapshot);
  return plan;
}

}  // namespace gpureap
