#include "watch/termination.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "kill/kill_run.hpp"
#include "kill/zombie_parent.hpp"
#include "text/human_format.hpp"

namespace gpureap {
namespace {

TerminationResult nothing_done(std::string outcome, std::string message) {
  TerminationResult result;
  result.outcome = std::move(outcome);
  result.message = std::move(message);
  return result;
}

TerminationResult nudge(const Rule& rule, const Candidate& zombie, const Snapshot& snapshot, const TerminationSettings& settings) {
  if (zombie.parent <= 1) return nothing_done("refused", "its parent is PID 1 (or not visible): nothing to remind");
  const std::string reason = fmt::format("gpureap watch: rule {} (zombie): reap zombie child {}", rule.name, zombie.pid);
  const NudgeResult nudged = nudge_zombie_parent(zombie.parent, zombie.parent_start_ticks,
                                                 snapshot.table.options().proc_root, reason, settings.audit);
  TerminationResult result;
  if (nudged.status == NudgeStatus::NotPinned) return nothing_done("gone", "the parent exited or its PID was reused; nothing sent");
  result.acted = nudged.status == NudgeStatus::Sent;
  result.outcome = result.acted ? "parent-nudged" : "nudge-failed";
  result.message = result.acted ? fmt::format("SIGCHLD sent to its parent {}", zombie.parent)
                                : fmt::format("SIGCHLD to its parent {} failed: {}", zombie.parent, std::strerror(nudged.error));
  return result;
}

}  // namespace

namespace {

// What the fresh reading says of each GPU: its UUID (lower case, as rules name them), and
// whether its process list could be read whole.
struct GpuReadability {
  std::set<unsigned> unreadable;
  std::map<unsigned, std::string> uuids;
};

GpuReadability gpu_readability(const DriverReading& reading) {
  GpuReadability gpus;
  for (const auto& gpu : reading.gpus) {
    std::string uuid = gpu.uuid;
    std::transform(uuid.begin(), uuid.end(), uuid.begin(), [](unsigned char c) { return std::tolower(c); });
    gpus.uuids[gpu.index] = uuid;
    if (gpu.error || !gpu.processes_complete) gpus.unreadable.insert(gpu.index);
  }
  return gpus;
}

EndRequest end_request(const Rule& rule, pid_t pid, const TerminationSettings& settings) {
  EndRequest request;
  request.pids = {pid};
  request.reason = fmt::format("gpureap watch: rule {} ({})", rule.name, condition_name(rule.condition));
  request.timeout_s = settings.kill_timeout_seconds;
  request.verify_timeout_s = settings.verify_timeout_seconds;
  request.protect = settings.protect;
  request.audit = settings.audit;
  request.interruption = settings.interruption;
  return request;
}

// Each GPU's release, NVIDIA's and AMD's or Intel's, in words; what was verified freed is added
// to the result.
std::string gpu_releases(const KillReport& report, TerminationResult& result) {
  std::string gpus;
  for (const auto& g : report.gpus) {
    if (g.verified) result.freed_bytes += g.freed_bytes.value_or(0);
    gpus += fmt::format("{}GPU {}: {}", gpus.empty() ? "" : "; ", g.index,
                        g.verified ? format_bytes(g.freed_bytes) + " freed" : g.message);
  }
  for (const auto& g : report.drm_gpus) {
    // Verified only where the driver reports a VRAM figure (amdgpu); the message names the GPU.
    const std::uint64_t freed = g.freed_bytes.value_or(0);
    if (g.verified) result.freed_bytes += freed;
    gpus += (gpus.empty() ? "" : "; ") +
            (g.verified ? fmt::format("{} GPU {}: {} freed, release verified", g.vendor, g.pci_address, format_bytes(freed))
                        : g.message);
  }
  return gpus;
}

// What the kill did to the candidate, the others it ended, and whether its GPUs were freed.
TerminationResult result_of(const EndResult& ended, pid_t pid) {
  const KillPlan& plan = ended.plan;
  const KillReport& report = ended.report;
  TerminationResult result;
  for (const auto& t : report.targets) {
    if (t.pid == pid) {
      result.outcome = kill_outcome_name(t.outcome);
      result.acted = !t.signals.empty();
      if (!t.detail.empty()) result.message = t.detail;
    } else if (t.outcome == KillOutcome::ExitedAfterSignal || t.outcome == KillOutcome::Killed) {
      result.also_ended.push_back(t.pid);
    }
  }
  if (const auto target = std::find_if(plan.targets.begin(), plan.targets.end(),
                                       [&](const PlannedTarget& t) { return t.pid == pid; });
      target != plan.targets.end() && target->refusal != Refusal::None) {
    result.message = target->refusal_text;
  } else if (target != plan.targets.end() && target->permission_denied) {
    result.message = target->permission_text;
  }
  // Verified when every GPU it held, NVIDIA's and AMD's or Intel's, showed the release.
  const auto verified = [](const auto& g) { return g.verified; };
  result.verified = (!report.gpus.empty() || !report.drm_gpus.empty()) &&
                    std::all_of(report.gpus.begin(), report.gpus.end(), verified) &&
                    std::all_of(report.drm_gpus.begin(), report.drm_gpus.end(), verified);
  const std::string gpus = gpu_releases(report, result);
  if (result.message.empty()) result.message = gpus;
  else if (!gpus.empty()) result.message += "; " + gpus;
  return result;
}

}  // namespace

TerminationResult terminate_candidate(SnapshotSource& source, const StillHolds& still_holds, const Rule& rule,
                                      const Candidate& seen, const TerminationSettings& settings, UserNames& names) {
  // Every process, as kill reads them: the plan's sweep looks at process groups and trees.
  auto snapshot = source.take(ProcScanScope::Everything);
  std::vector<FollowedProcess> followed = follow_snapshot(*snapshot, names);
  const auto it = std::find_if(followed.begin(), followed.end(),
                               [&](const FollowedProcess& f) { return f.facts.key() == seen.key(); });
  if (it == followed.end()) return nothing_done("gone", "it ended, or stopped being a GPU process, before the action");
  const DriverReading reading = reading_of(*snapshot);
  const GpuReadability gpus = gpu_readability(reading);
  const bool driver_readable = snapshot->driver.loaded && !reading.error;
  const auto fresh = judge(*it, driver_readable ? &reading : nullptr, gpus.unreadable);
  if (!fresh) return nothing_done("not-judgeable", "the driver could not be read to confirm the match");
  if (!still_holds(*fresh, gpus.uuids)) {
    return nothing_done("no-longer-matches", "it no longer matches the rule on a fresh look");
  }
  if (fresh->kind == CandidateKind::Zombie) return nudge(rule, *fresh, *snapshot, settings);
  EndResult ended;
  try {
    ended = end_chosen_pids(source, *snapshot, end_request(rule, fresh->pid, settings));
  } catch (const std::runtime_error& error) {
    return nothing_done("audit-failed", std::string(error.what()) + "; stopped before sending further signals");
  }
  return result_of(ended, fresh->pid);
}

}  // namespace gpureap
