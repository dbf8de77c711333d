#include "kill/kill_outcome.hpp"

#include <fmt/format.h>

namespace gpureap {

std::string survivor_words(const TargetOutcome& outcome, const KillSettings& settings) {
  if (outcome.signals.empty()) return "not signalled: still running";
  if (!settings.escalate) return fmt::format("still running after {} (--no-escalate)", settings.signal);
  return "survived every signal";
}

std::vector<TargetOutcome> planned_outcomes(const KillPlan& plan) {
  std::vector<TargetOutcome> outcomes;
  for (const auto& t : plan.targets) {
    TargetOutcome o;
    o.pid = t.pid;
    o.final_state = t.state;
    o.wchan = t.wchan;
    if (t.refusal != Refusal::None) {
      o.outcome = KillOutcome::Refused;
      o.detail = t.refusal_text;
    } else if (t.permission_denied) {
      o.outcome = KillOutcome::PermissionDenied;
      o.detail = t.permission_text;
    } else if (t.zombie()) {
      o.outcome = KillOutcome::Zombie;
      o.detail = fmt::format("its parent PID {} has not reaped it (wait()); SIGCHLD to the parent, or ending the "
                             "parent, clears it",
                             t.ppid);
    } else {
      o.outcome = KillOutcome::Planned;
    }
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

KillVerdict kill_verdict(const KillReport& report) {
  bool not_freed = false, denied = false, refused = false;
  for (const auto& t : report.targets) {
    if (t.outcome == KillOutcome::Survived || t.outcome == KillOutcome::StuckInD) not_freed = true;
    if (t.outcome == KillOutcome::PermissionDenied) denied = true;
    if (t.outcome == KillOutcome::Refused) refused = true;
  }
  if (report.settings.verify && !report.settings.dry_run) {
    for (const auto& g : report.gpus) {
      if (!g.verified) not_freed = true;
    }
    for (const auto& g : report.drm_gpus) {
      if (!g.verified) not_freed = true;
    }
  }
  if (report.interrupted_by != 0) return KillVerdict::Interrupted;
  if (not_freed) return KillVerdict::NotFreed;
  if (denied) return KillVerdict::PermissionDenied;
  if (refused) return KillVerdict::Refused;
  return KillVerdict::Ok;
}

}  // namespace gpureap
