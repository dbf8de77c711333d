// Memory that no listed process explains, per GPU, and why: holders the driver does not list
// (orphaned workers of a dead job), a release still in progress, or nothing at all — a
// driver-level leak that only a reset gets back.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "text/human_format.hpp"
#include "doctor/doctor.hpp"
#include "doctor/reset_readiness.hpp"
#include "proc/proc_io.hpp"

namespace gpureap {
namespace {

using Clock = std::chrono::steady_clock;


Evidence holder_evidence(const Snapshot& snapshot, const HolderView& h) {
  const ProcessInfo& p = *h.linux_process;
  const ProcessInfo* leader = snapshot.table.find(p.pgid);
  return {{"pid", h.pid},
          {"role", std::string(holder_role_name(h.role))},
          {"orphan_evidence", h.role == HolderRole::Orphan
                                  ? Evidence{{"kind", std::string(orphan_evidence_name(h.orphan_evidence))},
                                                   {"pids", h.evidence_pids}}
                                  : EvidenceValue(nullptr)},
          {"ppid", p.ppid},
          {"pgid", p.pgid},
          {"process_group_leader_alive", leader != nullptr},
          {"user", p.user},
          {"state", std::string(1, p.state)},
          {"age_seconds", p.elapsed_seconds},
          {"command", p.command()},
          {"container", p.container ? EvidenceValue(p.container->id) : EvidenceValue(nullptr)}};
}

std::string evidence_text(const HolderView& h) {
  const pid_t leader = h.evidence_pids.empty() ? 0 : h.evidence_pids.front();
  switch (h.orphan_evidence) {
    case OrphanEvidence::ExitedListedGroupLeader:
      return fmt::format("; the driver still lists PID {}, which led its process group and has exited", leader);
    case OrphanEvidence::ExitedListedSessionLeader:
      return fmt::format("; the driver still lists PID {}, which led its session and has exited", leader);
    case OrphanEvidence::GroupLeaderGone:
      return fmt::format("; its process group leader {} (the job that forked it) is gone", leader);
    case OrphanEvidence::SessionLeaderGone:
      return fmt::format("; its session leader {} (the job that started it) is gone", leader);
    case OrphanEvidence::None: break;
  }
  return h.linux_process->ppid <= 1 ? "; its parent is init (not evidence of a dead job: services have it too)" : "";
}

std::string holder_line(const HolderView& h) {
  const ProcessInfo& p = *h.linux_process;
  return fmt::format("PID {} {} age {} state {}: {}{}", h.pid, p.user, format_duration(p.elapsed_seconds),
                     p.state, p.command(), evidence_text(h));
}

std::string pid_list(const std::vector<pid_t>& pids) {
  // Appended piece by piece: gcc 12 at -O3 warns falsely (-Wrestrict, -Wstringop-overflow)
  // about `"" + std::string`'s insert at the front once it is inlined here.
  std::string out;
  for (pid_t pid : pids) {
    if (!out.empty()) out += ' ';
    out += std::to_string(pid);
  }
  return out;
}

// Unlisted holders that keep a dead job's memory: orphans (safe to end: their job is gone)
// and other unlisted holders (their parent lives: end them only when chosen).
void report_holders(const Snapshot& snapshot, const GpuView& gpu, const std::vector<const HolderView*>& holders,
                    bool orphans, std::uint64_t unattributed, bool above, Diagnosis& diagnosis) {
  if (holders.empty()) return;
  const unsigned index = gpu.reading.index;
  // What the driver still lists under exited PIDs whose contexts these holders keep alive.
  EvidenceList exited;
  std::uint64_t exited_bytes = 0;
  std::string exited_pids;
  for (const auto& p : snapshot.processes) {
    if (p.gpu_index != index || p.held_by.empty()) continue;
    const bool ours = std::any_of(holders.begin(), holders.end(), [&](const HolderView* h) {
      return std::find(p.held_by.begin(), p.held_by.end(), h->pid) != p.held_by.end();
    });
    if (!ours) continue;
    exited.push_back(Evidence{{"pid", p.driver.pid}, {"gpu_memory_bytes", p.driver.used_memory.value_or(0)}, {"held_by", p.held_by}});
    exited_bytes += p.driver.used_memory.value_or(0);
    if (!exited_pids.empty()) exited_pids += ", ";
    exited_pids += std::to_string(p.driver.pid);
  }
  const std::uint64_t held = unattributed + exited_bytes;
  above = above || exited_bytes > 0;
  Finding f;
  f.id = orphans ? FindingId::OrphanedHolders : FindingId::UnlistedHolders;
  // Unlisted holders of a GPU whose memory is explained cost nothing: information.
  f.severity = orphans || above ? Severity::Warning : Severity::Info;
  f.gpu = index;
  std::vector<pid_t> pids;
  EvidenceList list;
  for (const HolderView* h : holders) {
    pids.push_back(h->pid);
    list.push_back(holder_evidence(snapshot, *h));
    f.details.push_back(holder_line(*h));
  }
  const std::string what = orphans ? "orphaned process(es) whose job has died" : "process(es) the driver does not list";
  f.summary = above ? fmt::format("GPU {}: {} kept in use by {} {}, which still hold its device files", index,
                                  format_bytes(held), holders.size(), what)
                    : fmt::format("GPU {}: {} {} still hold its device files", index, holders.size(), what);
  if (!exited_pids.empty()) {
    f.details.push_back(fmt::format("The driver still lists exited PID {} with {}: it lists a context under the "
                                    "process that created it for as long as any holder keeps it alive.",
                                    exited_pids, format_bytes(exited_bytes)));
  }
  f.details.insert(f.details.begin(), "The driver frees a context's memory only when the last descriptor to it closes; "
                                      "forked workers inherit those descriptors.");
  f.evidence["holders"] = list;
  f.evidence["unattributed_bytes"] = unattributed;
  f.evidence["listed_for_exited"] = exited;
  f.evidence["held_bytes"] = held;
  f.remedies.push_back({"gpureap ps --tree", Risk::None, "see them with their process trees"});
  // Orphans are ended unasked only when they explain memory nothing else does; otherwise
  // ending them frees nothing and only --only may choose it.
  const bool fix_unasked = orphans && above;
  if (orphans && !above) {
    f.details.push_back("The GPU's memory is explained without them: --fix leaves them unless chosen with "
                        "--only orphaned-holders.");
  }
  f.remedies.push_back({"gpureap kill " + pid_list(pids), orphans ? Risk::Low : Risk::Medium,
                        orphans ? "end them (SIGTERM, then SIGKILL) and verify the memory comes back"
                                : "end them, if the job they belong to should not run; their parent is alive "
                                  "(doctor --fix --only unlisted-holders does this)",
                        fix_unasked});
  diagnosis.findings.push_back(std::move(f));
  FixAction fix;
  fix.kind = FixAction::Kind::EndOrphans;
  fix.finding_id = orphans ? FindingId::OrphanedHolders : FindingId::UnlistedHolders;
  fix.gpu = index;
  fix.pids = pids;
  fix.only_when_chosen = !fix_unasked;
  fix.description = fmt::format("end {} on GPU {}: PID {}", orphans ? "the orphaned holders" : "the unlisted holders",
                                index, pid_list(pids));
  diagnosis.fixes.push_back(std::move(fix));
}

struct ReleaseWatch {
  std::vector<std::pair<double, std::uint64_t>> samples;  // (seconds since start, used bytes)
  bool falling() const {
    if (samples.size() < 2) return false;
    const std::uint64_t first = samples.front().second;
    return std::any_of(samples.begin() + 1, samples.end(), [first](const auto& s) { return s.second + (1u << 20) <= first; });
  }
};

// Re-reads used memory until it stops falling or the window ends, for every candidate GPU.
std::map<unsigned, ReleaseWatch> watch_release(SnapshotSource* source, const Snapshot& snapshot,
                                               const std::vector<unsigned>& gpus, double seconds,
                                               const std::map<unsigned, std::uint64_t>& settled_at) {
  std::map<unsigned, ReleaseWatch> watches;
  for (unsigned g : gpus) {
    watches[g].samples.emplace_back(0.0, snapshot.gpu_by_index(g)->memory.used.value_or(0));
  }
  const auto start = Clock::now();
  const auto end = start + std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  while (source != nullptr && Clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto reading = source->read_driver_only();
    if (!reading) break;
    const double t = std::chrono::duration<double>(Clock::now() - start).count();
    bool all_settled = true;
    for (const auto& r : reading->gpus) {
      auto it = watches.find(r.index);
      if (it == watches.end() || !r.memory.used) continue;
      it->second.samples.emplace_back(t, *r.memory.used);
      if (*r.memory.used > settled_at.at(r.index)) all_settled = false;
    }
    if (all_settled) break;  // released: no need to wait out the window
  }
  return watches;
}

void report_release(const GpuView& gpu, const ReleaseWatch& watch, std::uint64_t settled_at, Diagnosis& diagnosis) {
  const unsigned index = gpu.reading.index;
  const std::uint64_t first = watch.samples.front().second;
  const std::uint64_t last = watch.samples.back().second;
  Finding f;
  f.id = FindingId::ReleaseInProgress;
  f.severity = Severity::Info;
  f.gpu = index;
  const bool done = last <= settled_at;
  f.summary = done ? fmt::format("GPU {}: {} were being released by the driver and came back within {:.1f} s", index,
                                 format_bytes(first - last), watch.samples.back().first)
                   : fmt::format("GPU {}: memory is being released: used fell from {} to {} in {:.1f} s; {} still to go",
                                 index, format_bytes(first), format_bytes(last), watch.samples.back().first,
                                 format_bytes(last - settled_at));
  f.details.push_back("After the last descriptor closes the driver tears the context down asynchronously; "
                      "readings lag by milliseconds to seconds.");
  EvidenceList samples;
  for (const auto& [t, used] : watch.samples) samples.push_back(Evidence{{"seconds", t}, {"used_bytes", used}});
  f.evidence["samples"] = samples;
  f.evidence["falling"] = true;
  f.evidence["remaining_bytes"] = last > settled_at ? last - settled_at : 0;
  if (!done) f.remedies.push_back({"gpureap doctor", Risk::None, "look again in a few seconds"});
  diagnosis.findings.push_back(std::move(f));
}

// Processes we could not inspect, any of which might hold the memory.
std::size_t hidden_processes(const Snapshot& snapshot) {
  std::size_t hidden = 0;
  for (const auto& [pid, process] : snapshot.table.processes()) {
    if (process.fd_access == FdAccess::Denied && !process.kernel_thread && !procfs::denial_hides_nothing(pid)) ++hidden;
  }
  return hidden;
}

void report_leak(const Snapshot& snapshot, const GpuView& gpu, std::uint64_t unattributed, const ReleaseWatch& watch,
                 std::size_t hidden, Diagnosis& diagnosis) {
  const unsigned index = gpu.reading.index;
  Finding f;
  f.id = FindingId::MemoryLeak;
  f.gpu = index;
  const bool incomplete = hidden > 0;
  f.severity = incomplete ? Severity::Warning : Severity::Critical;
  f.summary = fmt::format("GPU {}: {} in use with no process holding the GPU: the memory has leaked in the driver",
                          index, format_bytes(unattributed));
  if (incomplete) {
    f.summary = fmt::format("GPU {}: {} in use that no visible process explains ({} process(es) could not be inspected)",
                            index, format_bytes(unattributed), hidden);
  }
  f.details.push_back(fmt::format("Nothing but the listed processes and NVML clients holds /dev/nvidia{}, and used "
                                  "memory did not fall in {:.1f} s of re-measuring.",
                                  gpu.reading.minor_number.value_or(index), watch.samples.back().first));
  const ResetReadiness readiness = check_reset_readiness(snapshot, index);
  for (const auto& b : readiness.blockers) f.details.push_back("Reset blocked: " + b.text);
  EvidenceList samples;
  for (const auto& [t, used] : watch.samples) samples.push_back(Evidence{{"seconds", t}, {"used_bytes", used}});
  f.evidence["unattributed_bytes"] = unattributed;
  f.evidence["samples"] = samples;
  f.evidence["falling"] = false;
  f.evidence["reset"] = readiness.evidence();
  f.evidence["processes_not_inspected"] = hidden;
  if (incomplete) f.remedies.push_back({"sudo gpureap doctor", Risk::None, "as root, every process's descriptors can be checked"});
  const std::string device_id = gpu_device_id(gpu.reading);
  f.remedies.push_back({fmt::format("nvidia-smi -r -i {}", device_id), Risk::High,
                        (readiness.ready() ? std::string("reset the GPU: frees everything on it (nothing uses it now; "
                                                         "NVIDIA does not guarantee success: check it afterwards)")
                                           : fmt::format("reset the GPU once nothing uses it ({} blocker(s) above)",
                                                         readiness.blockers.size())) +
                            "; doctor --fix --allow-reset does this when nothing uses it",
                        false});
  f.remedies.push_back({"rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia && modprobe nvidia_uvm",
                        Risk::High, "reload the driver when a reset fails: every GPU must be idle"});
  f.remedies.push_back({"systemctl reboot", Risk::High, "reboot when nothing else helps"});
  diagnosis.findings.push_back(std::move(f));
  diagnosis.leaked_gpus.push_back(index);
  FixAction fix;
  fix.kind = FixAction::Kind::ResetGpu;
  fix.finding_id = FindingId::MemoryLeak;
  fix.gpu = index;
  fix.description = fmt::format("reset GPU {} with nvidia-smi -r -i {} (only with --allow-reset)", index, device_id);
  diagnosis.fixes.push_back(std::move(fix));
}

// Unexplained memory on a GPU whose reservation is unknown: perhaps all reservation, so never
// called a critical leak and no reset is offered; a warning only beyond the allowance, after
// re-measuring showed it is not being released.
void report_unknown_reservation(const GpuView& gpu, std::uint64_t unattributed, std::uint64_t tolerance,
                                std::uint64_t allowance, const ReleaseWatch* watch, Diagnosis& diagnosis) {
  const unsigned index = gpu.reading.index;
  Finding f;
  f.id = FindingId::MemoryUnexplained;
  f.gpu = index;
  const bool beyond = watch != nullptr;
  f.severity = beyond ? Severity::Warning : Severity::Info;
  f.summary = fmt::format("GPU {}: {} in use that no process explains, {} the allowance for the driver's own "
                          "reservation: this driver reports only v1 memory figures",
                          index, format_bytes(unattributed), beyond ? "beyond" : "within");
  f.details.push_back("With v1 figures (drivers before R510) \"used\" includes the memory the driver reserves for "
                      "itself, whose size is not reported, so it cannot be told from a leak.");
  f.details.push_back(fmt::format("Allowed for the reservation: {} beyond the usual {} of per-process overhead.",
                                  format_bytes(allowance), format_bytes(tolerance)));
  if (beyond) {
    f.details.push_back(fmt::format("Used memory did not fall in {:.1f} s of re-measuring; it may be a leak, or a "
                                    "larger reservation than allowed for.",
                                    watch->samples.back().first));
  }
  f.evidence["unattributed_bytes"] = unattributed;
  f.evidence["memory_source"] = gpu.memory.source;
  f.evidence["reserved_bytes_known"] = false;
  f.evidence["reservation_allowance_bytes"] = allowance;
  if (beyond) {
    f.remedies.push_back({"nvidia-smi -q -d MEMORY", Risk::None,
                          "compare with the figures right after a reboot: the same amount in use then is the "
                          "reservation, not a leak"});
    f.remedies.push_back({"", Risk::None, "a driver of R510 or later reports the reservation separately"});
  }
  diagnosis.findings.push_back(std::move(f));
}

}  // namespace

std::uint64_t tolerance_bytes(const GpuView& gpu, const DoctorOptions& options) {
  return options.tolerance_bytes.value_or(overhead_tolerance_bytes(gpu.reading.processes.size()));
}

void check_memory(SnapshotSource* source, const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis) {
  std::vector<unsigned> candidates;
  std::map<unsigned, std::uint64_t> settled_at;
  for (const auto& gpu : snapshot.gpus) {
    if (gpu.reading.error || !gpu.memory.used) continue;
    const unsigned index = gpu.reading.index;
    const std::uint64_t tolerance = tolerance_bytes(gpu, options);
    const bool known = gpu.memory.unattributed.has_value();
    const std::uint64_t unattributed = gpu.memory.unattributed.value_or(0);
    const std::uint64_t allowance = reservation_allowance_bytes(gpu);
    const bool above = known && unattributed > tolerance + allowance;
    if (!known) {
      diagnosis.notes.push_back(fmt::format("GPU {}: the driver does not report every process's memory, so memory "
                                            "that no process explains cannot be computed",
                                            index));
    }
    std::vector<const HolderView*> orphans, unlisted;
    for (const auto& h : snapshot.holders) {
      if (!h.holds_gpu(index) || h.listed_by_driver) continue;
      if (h.role == HolderRole::Orphan) orphans.push_back(&h);
      if (h.role == HolderRole::Unlisted) unlisted.push_back(&h);
    }
    report_holders(snapshot, gpu, orphans, true, unattributed, above, diagnosis);
    report_holders(snapshot, gpu, unlisted, false, unattributed, above && orphans.empty(), diagnosis);
    if (above && orphans.empty() && unlisted.empty()) {
      candidates.push_back(index);
      settled_at[index] = gpu.memory.attributed + tolerance + allowance;
    } else if (known && allowance > 0 && unattributed > tolerance && orphans.empty() && unlisted.empty()) {
      report_unknown_reservation(gpu, unattributed, tolerance, allowance, nullptr, diagnosis);
    }
  }
  if (candidates.empty()) return;
  const auto watches = watch_release(source, snapshot, candidates, options.settle_seconds, settled_at);
  const std::size_t hidden = hidden_processes(snapshot);
  for (unsigned index : candidates) {
    const GpuView& gpu = *snapshot.gpu_by_index(index);
    const ReleaseWatch& watch = watches.at(index);
    if (watch.falling()) {
      report_release(gpu, watch, settled_at.at(index), diagnosis);
    } else if (!gpu.memory.reserved) {
      report_unknown_reservation(gpu, *gpu.memory.unattributed, tolerance_bytes(gpu, options),
                                 reservation_allowance_bytes(gpu), &watch, diagnosis);
    } else {
      report_leak(snapshot, gpu, *gpu.memory.unattributed, watch, hidden, diagnosis);
    }
  }
}

}  // namespace gpureap
