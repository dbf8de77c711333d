// ROCm processes whose job is over while their KFD context still holds VRAM (ROCm's
// k8s-device-plugin#202 asks for them before a GPU is given to the next job). Read-only: the
// remedies are printed, nothing is acted on.
//
// What the kernel does (drivers/gpu/drm/amd/amdkfd/kfd_process.c): opening /dev/kfd creates the
// process's kfd_process and, in kfd_create_process_sysfs, the directory
// <sysfs>/class/kfd/kfd/proc/<pid> named after lead_thread->pid, the PID in the initial PID
// namespace. The directory goes in kfd_process_wq_release (kfd_process_remove_sysfs), which runs
// when the last reference is dropped: the mmu notifier's, put when the address space is torn
// down (exit_mmap calls kfd_process_notifier_release), and the one each open /dev/kfd file
// holds. So an entry whose process is gone, or a zombie, names a context that outlived its
// process: an exit stuck before its address space went, or a /dev/kfd descriptor kept by
// another process. And inside a container's PID namespace the name is the host's PID.
#include <algorithm>
#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "doctor/blocked_io.hpp"
#include "doctor/doctor.hpp"
#include "doctor/ipc_removal.hpp"
#include "doctor/reset_readiness.hpp"
#include "text/human_format.hpp"

namespace gpureap {
namespace {

// Why a KFD process's job is over, proven from /proc; nullopt when it runs as far as we can tell.
struct KfdLeftBehind {
  std::string reason;  // evidence "reason"
  std::string words;   // for the summary
  Severity severity = Severity::Warning;
  std::optional<pid_t> leader;  // the gone leader that proves it
};

std::optional<KfdLeftBehind> kfd_left_behind(const Snapshot& snapshot, const ProcessInfo* process, bool stayed_in_d) {
  if (process == nullptr) {
    if (snapshot.in_child_pid_namespace) {
      return KfdLeftBehind{"not-in-this-pid-namespace",
                           "is no process in this PID namespace (a container's): another container's, or gone",
                           Severity::Info, std::nullopt};
    }
    return KfdLeftBehind{"gone", "has exited, yet its KFD context stays", Severity::Warning, std::nullopt};
  }
  // In a child PID namespace the directory names a host PID: a process here with that number
  // is not shown to be the one.
  if (snapshot.in_child_pid_namespace || process->kernel_thread) return std::nullopt;
  // The kernel keeps the context while any descriptor of its /dev/kfd file is left, after its
  // leader is gone and the PID free for reuse: a process at that PID holding no /dev/kfd is not
  // shown to be its owner (it may have closed it, or be a stranger with the number), and is
  // never offered to be ended.
  if (!Snapshot::holds_kfd(*process) && process->state != 'Z') {
    return KfdLeftBehind{"pid-holds-no-kfd",
                         "names a process that holds no /dev/kfd: the context is kept by another descriptor of its "
                         "/dev/kfd file (a worker it forked), or the PID now names another process",
                         Severity::Info, std::nullopt};
  }
  if (process->state == 'Z') {
    return KfdLeftBehind{"zombie", "is a zombie, yet its KFD context stays", Severity::Warning, std::nullopt};
  }
  if (stayed_in_d) {
    return KfdLeftBehind{"uninterruptible", "is stuck in uninterruptible sleep (D)", Severity::Warning, std::nullopt};
  }
  pid_t leader = 0;
  switch (gone_leader_evidence(snapshot, *process, &leader)) {
    case OrphanEvidence::GroupLeaderGone:
      return KfdLeftBehind{"group-leader-gone", fmt::format("outlived its job: its process-group leader {} is gone", leader),
                           Severity::Warning, leader};
    case OrphanEvidence::SessionLeaderGone:
      return KfdLeftBehind{"session-leader-gone", fmt::format("outlived its job: its session leader {} is gone", leader),
                           Severity::Warning, leader};
    default: return std::nullopt;
  }
}

void add_kfd_remedies(const KfdLeftBehind& why, pid_t pid, const ProcessInfo* process, const std::vector<pid_t>& holders,
                      std::vector<Remedy> resets, Finding& f) {
  // Its process gone, the context lives on in the processes holding its /dev/kfd and render
  // client (Snapshot::kfd_context_holders): ending them frees it, and nothing else is needed.
  if (!holders.empty()) {
    std::string pids;
    for (const pid_t holder : holders) pids += fmt::format(" {}", holder);
    f.remedies.push_back({"gpureap kill" + pids, Risk::Low,
                          "end what keeps the exited job's KFD context: its VRAM goes back when they have ended"});
    f.remedies.push_back({"gpureap ps", Risk::None, "see the AMD GPU's clients and KFD processes beside it"});
    return;
  }
  f.remedies.push_back({"gpureap ps", Risk::None, "see the AMD GPU's clients and KFD processes beside it"});
  if (why.reason == "pid-holds-no-kfd") return;  // nothing here is shown to be the context's
  const bool alive_here = process != nullptr && !process->kernel_thread && process->state != 'Z' &&
                          why.reason != "not-in-this-pid-namespace";
  if (alive_here && why.reason == "uninterruptible") {
    f.remedies.push_back({fmt::format("cat /proc/{}/stack", pid), Risk::None, "see the kernel call it waits in (root)"});
    f.remedies.push_back({fmt::format("gpureap kill {}", pid), Risk::Medium,
                          "queue SIGKILL: it takes effect the moment the kernel call returns"});
  } else if (alive_here) {
    f.remedies.push_back({fmt::format("gpureap kill {}", pid), Risk::Low,
                          "end it: its job is over, and its VRAM goes back when its KFD context does"});
  } else if (process != nullptr && process->state == 'Z' && process->ppid > 1) {
    f.remedies.push_back({fmt::format("kill -CHLD {}", process->ppid), Risk::None,
                          "remind its parent to reap it (harmless)"});
  }
  if (why.reason == "not-in-this-pid-namespace") {
    f.remedies.push_back({"gpureap doctor", Risk::None, "run it on the host, whose PIDs the KFD directories name"});
  }
  // Ending a live process frees its context; a reset is for one that cannot be ended.
  if (!alive_here || why.reason == "uninterruptible") {
    for (auto& reset : resets) f.remedies.push_back(std::move(reset));
  }
  f.remedies.push_back({"systemctl reboot", Risk::High, "when the context never goes: nothing else frees its VRAM"});
}

using BlockedSamples = std::vector<std::pair<pid_t, std::optional<BlockedSample>>>;

// D for a moment is disk I/O; D without one context switch while watched is stuck. Without
// time to watch (export's and watch's quick checks) D proves nothing. Samples each KFD process
// in D, then waits for the second look.
BlockedSamples first_blocked_samples(const Snapshot& snapshot, double settle_seconds) {
  const std::string& proc_root = snapshot.table.options().proc_root;
  BlockedSamples blocked;
  for (const auto& kfd : snapshot.drm.kfd_processes) {
    const ProcessInfo* process = snapshot.table.find(kfd.pid);
    if (process != nullptr && process->state == 'D' && !snapshot.in_child_pid_namespace && settle_seconds > 0) {
      blocked.emplace_back(kfd.pid, sample_blocked(proc_root, kfd.pid));
    }
  }
  if (!blocked.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long long>(std::min(settle_seconds, 0.5) * 1000)));
  }
  return blocked;
}

bool stayed_blocked_since(const BlockedSamples& blocked, pid_t kfd_pid, const std::string& proc_root) {
  bool stayed = false;
  for (const auto& [pid, first] : blocked) {
    if (pid != kfd_pid || !first) continue;
    const auto second = sample_blocked(proc_root, pid);
    stayed = second && stayed_blocked(*first, *second);
  }
  return stayed;
}

// "; kept alive by PID (command), ..." for the processes that hold the context's files.
std::string kept_alive_text(const Snapshot& snapshot, const std::vector<pid_t>& holders) {
  std::string kept;
  for (const pid_t holder : holders) {
    const ProcessInfo* h = snapshot.table.find(holder);
    kept += fmt::format("{}{} ({})", kept.empty() ? "" : ", ", holder, h != nullptr ? h->command() : std::string("?"));
  }
  return fmt::format("; kept alive by {}, which hold{} its /dev/kfd and render client", kept,
                     holders.size() == 1 ? "s" : "");
}

// The context's VRAM per GPU, as evidence and details; the finding's GPU when there is one.
EvidenceList add_vram_lines(const drm::DrmReading& reading, const drm::KfdProcess& kfd, Finding& f) {
  EvidenceList vram;
  std::string vram_pci;  // the last entry's GPU: the finding's when it is the only one
  for (const auto& memory : kfd.vram) {
    if (memory.vram_bytes == 0) continue;
    const std::string pci = drm::kfd_gpu_pci_address(reading, memory.gpu_id);
    vram_pci = pci;
    vram.push_back(Evidence{{"gpu_id", memory.gpu_id},
                    {"pci_bus_id", pci.empty() ? EvidenceValue(nullptr) : EvidenceValue(pci)},
                    {"vram_bytes", memory.vram_bytes}});
    f.details.push_back(fmt::format("{} on GPU {} (KFD gpu_id {})", format_bytes(memory.vram_bytes),
                                    pci.empty() ? std::string("?") : pci, memory.gpu_id));
  }
  if (vram.size() == 1 && !vram_pci.empty()) f.gpu_pci = vram_pci;
  return vram;
}

// Short of a reboot, a reset frees what a context that never goes holds: say what it ends.
EvidenceList add_reset_scopes(const Snapshot& snapshot, const drm::KfdProcess& kfd, Finding& f,
                              std::vector<Remedy>& reset_remedies) {
  EvidenceList resets;
  for (const auto& device : snapshot.drm.devices) {
    if (!drm::kfd_vram_on(snapshot.drm, kfd, device.pci_address).value_or(0)) continue;
    const AmdResetScope scope = amd_reset_scope(snapshot, device);
    for (auto& line : scope.details(snapshot, device)) f.details.push_back(std::move(line));
    resets.push_back(scope.evidence());
    if (auto remedy = scope.remedy(device)) reset_remedies.push_back(std::move(*remedy));
  }
  return resets;
}

Finding kfd_finding(const Snapshot& snapshot, const drm::KfdProcess& kfd, const ProcessInfo* process,
                    const KfdLeftBehind& why, std::uint64_t total) {
  const std::string command = process != nullptr ? process->command() : std::string("not visible here");
  const std::vector<pid_t> holders = snapshot.kfd_context_holders(kfd.pid);
  Finding f;
  f.id = FindingId::KfdProcessLeftBehind;
  f.severity = holders.empty() ? why.severity : Severity::Warning;
  f.summary = fmt::format("KFD process {} ({}) {}: {} of AMD GPU VRAM is still allocated to it", kfd.pid, command,
                          why.words, format_bytes(total));
  if (!holders.empty()) f.summary += kept_alive_text(snapshot, holders);
  const EvidenceList vram = add_vram_lines(snapshot.drm, kfd, f);
  f.details.push_back("The kernel keeps /sys/class/kfd/kfd/proc/" + std::to_string(kfd.pid) +
                      " until the context's last reference goes: the process's address space, and every "
                      "/dev/kfd descriptor of it.");
  std::vector<Remedy> reset_remedies;
  const EvidenceList resets = add_reset_scopes(snapshot, kfd, f, reset_remedies);
  f.evidence["pid"] = kfd.pid;
  f.evidence["command"] = process != nullptr ? EvidenceValue(command) : EvidenceValue(nullptr);
  f.evidence["state"] = process != nullptr ? EvidenceValue(std::string(1, process->state)) : EvidenceValue(nullptr);
  f.evidence["reason"] = why.reason;
  f.evidence["leader_pid"] = EvidenceValue(why.leader);
  f.evidence["pasid"] = EvidenceValue(kfd.pasid);
  f.evidence["vram_bytes"] = total;
  f.evidence["vram"] = vram;
  f.evidence["in_child_pid_namespace"] = snapshot.in_child_pid_namespace;
  f.evidence["resets"] = resets;
  f.evidence["held_by"] = holders;
  add_kfd_remedies(why, kfd.pid, process, holders, std::move(reset_remedies), f);
  return f;
}

}  // namespace

void check_kfd_processes(const Snapshot& snapshot, double settle_seconds, Diagnosis& diagnosis) {
  const auto& reading = snapshot.drm;
  const std::string& proc_root = snapshot.table.options().proc_root;
  const BlockedSamples blocked = first_blocked_samples(snapshot, settle_seconds);
  for (const auto& kfd : reading.kfd_processes) {
    std::uint64_t total = 0;
    for (const auto& memory : kfd.vram) total += memory.vram_bytes;
    if (total == 0) continue;  // holds no VRAM: nothing to give back before the GPU is reused
    const ProcessInfo* process = snapshot.table.find(kfd.pid);
    // A scan of GPU holders only (export's, watch's) leaves out a process that no longer holds
    // /dev/kfd: absent from the table is no proof it is gone, /proc is.
    if (process == nullptr && process_exists(kfd.pid, proc_root)) continue;
    const bool stayed = stayed_blocked_since(blocked, kfd.pid, proc_root);
    const auto why = kfd_left_behind(snapshot, process, stayed);
    if (!why) continue;
    diagnosis.findings.push_back(kfd_finding(snapshot, kfd, process, *why, total));
  }
  if (snapshot.in_child_pid_namespace && !reading.kfd_processes.empty()) {
    diagnosis.notes.push_back(
        "KFD process directories name the host's PIDs, and gpureap runs in a PID namespace (a container): a KFD "
        "process whose PID exists here was not judged (run gpureap doctor on the host)");
  }
}

}  // namespace gpureap
