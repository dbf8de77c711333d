#include "kill/kill_run.hpp"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include <fmt/format.h>

#include "kill/kill_execution.hpp"
#include "kill/tree_sweep.hpp"
#include "text/signal_names.hpp"

namespace gpureap {
namespace {

// Loads status/cmdline/... for every selected process and (with `tree`) its descendants:
// the sweep's safety check looks at each of them. Then builds the plan.
KillPlan plan_selected(Snapshot& snapshot, const Selection& selection, const PlanPolicy& policy, bool tree) {
  std::vector<pid_t> detail_pids;
  for (const auto& s : selection.processes) {
    if (!s.present) continue;
    detail_pids.push_back(s.pid);
    if (tree) {
      const std::vector<pid_t> descendants = snapshot.table.descendants_of(s.pid);
      detail_pids.insert(detail_pids.end(), descendants.begin(), descendants.end());
    }
  }
  // The sweep's check also looks at the members of each target's process group (protection
  // needs the owner and the executable).
  std::set<pid_t> groups;
  for (const auto& s : selection.processes) {
    if (const ProcessInfo* p = snapshot.table.find(s.pid); p != nullptr && p->pgid > 1) groups.insert(p->pgid);
  }
  if (tree && !groups.empty()) {
    for (const auto& [pid, info] : snapshot.table.processes()) {
      if (groups.count(info.pgid)) detail_pids.push_back(pid);
    }
  }
  std::sort(detail_pids.begin(), detail_pids.end());
  detail_pids.erase(std::unique(detail_pids.begin(), detail_pids.end()), detail_pids.end());
  snapshot.table.load_details(detail_pids);
  return build_plan(snapshot, selection, policy);
}

// Pins every actionable target from the start time the snapshot read: whatever happens to the
// PIDs afterwards, only these processes can receive our signals. Raises RLIMIT_NOFILE to its
// hard limit first; a target that still finds no descriptor fails with EMFILE (reported).
std::map<pid_t, PinResult> pin_targets(const KillPlan& plan, const Snapshot& snapshot) {
  raise_open_file_limit();
  // Room is kept for the reads of /proc the ladder needs: a target beyond it fails as EMFILE
  // (reported, exit 6) instead of starving those reads.
  std::size_t budget = sweep::pidfd_budget();
  std::map<pid_t, PinResult> pins;
  for (const auto& t : plan.targets) {
    if (!t.actionable()) continue;
    PinResult pin;
    if (budget == 0) {
      pin.status = PinStatus::Error;
      pin.error = EMFILE;
    } else {
      pin = PidRef::pin(t.pid, t.start_time_ticks, snapshot.table.options().proc_root);
      if (pin.status == PinStatus::Ok) --budget;
    }
    pins.emplace(t.pid, std::move(pin));
  }
  return pins;
}

// A target left alive whose memory the plan counted on: it survived, or was held back at the
// last moment (an MPS client whose terminate_client failed, and its server).
bool any_survivor(const KillPlan& plan, const KillReport& report) {
  return std::any_of(report.targets.begin(), report.targets.end(), [&](const TargetOutcome& o) {
    if (o.outcome == KillOutcome::Survived || o.outcome == KillOutcome::StuckInD) return true;
    return o.outcome == KillOutcome::Refused &&
           std::any_of(plan.targets.begin(), plan.targets.end(),
                       [&](const PlannedTarget& t) { return t.pid == o.pid && t.actionable(); });
  });
}

// Polls the driver through `source` until the plan's memory is released (no wait when a
// target survived: waiting cannot help). Fills report.gpus, or a note when the driver is gone.
void verify_after_kill(const KillPlan& plan, SnapshotSource& source, const Snapshot& snapshot,
                       double verify_timeout_s, KillReport& report, const Interruption& interruption) {
  if (!report.settings.verify) return;
  const bool survivor = any_survivor(plan, report);
  verify_drm_after_kill(plan, source, verify_timeout_s, survivor, interruption, report);
  if (plan.gpus.empty()) return;
  if (!snapshot.driver.loaded) {
    report.notes.push_back("memory release not verified: " + snapshot.driver.message);
    for (const auto& g : plan.gpus) {
      GpuVerification v;
      v.index = g.index;
      v.expected_free_bytes = g.expected_free_bytes;
      v.message = fmt::format("GPU {}: not verified: the driver could not be read", g.index);
      report.gpus.push_back(v);
    }
    return;
  }
  DriverPoll poll_driver = [&source]() { return source.read_driver_only(); };
  SnapshotPoll take = [&source]() { return source.take(); };
  VerifyOptions verify;
  verify.timeout = std::chrono::milliseconds(survivor ? 0 : static_cast<long long>(verify_timeout_s * 1000));
  verify.interruption = interruption;
  report.gpus = verify_release(plan, poll_driver, take, verify);
}

}  // namespace

void verify_drm_after_kill(const KillPlan& plan, const SnapshotSource& source, double verify_timeout_s,
                           bool survivor, const Interruption& interruption, KillReport& report) {
  if (plan.drm_gpus.empty()) return;
  VerifyOptions verify;
  verify.interruption = interruption;
  verify.timeout = std::chrono::milliseconds(survivor ? 0 : static_cast<long long>(verify_timeout_s * 1000));
  report.drm_gpus = verify_drm_release(plan, [&source]() { return source.read_drm_only(); }, verify);
}

EndResult end_chosen_pids(SnapshotSource& source, Snapshot& snapshot, const EndRequest& request) {
  SelectionCriteria criteria;
  criteria.pids = request.pids;
  std::sort(criteria.pids.begin(), criteria.pids.end());
  criteria.pids.erase(std::unique(criteria.pids.begin(), criteria.pids.end()), criteria.pids.end());
  Selection selection = select_targets(snapshot, criteria);
  if (!request.reason.empty()) {
    for (auto& s : selection.processes) {
      if (!s.via) s.reason = request.reason;
    }
  }
  PreparedKill prepared = prepare_kill(snapshot, selection, kill_policy(snapshot, request.protect));
  CarryOutOptions how;
  how.execution.engine.first_signal = SIGTERM;
  how.execution.engine.timeout = std::chrono::milliseconds(static_cast<long long>(request.timeout_s * 1000));
  how.execution.engine.proc_root = snapshot.table.options().proc_root;
  how.execution.engine.interruption = request.interruption;
  how.verify_timeout_s = request.verify_timeout_s;
  how.audit = request.audit;
  EndResult result;
  result.report = planned_report(prepared.plan, how.execution);
  carry_out_kill(prepared, source, snapshot, how, result.report);
  result.plan = std::move(prepared.plan);
  return result;
}

PlanPolicy kill_policy(const Snapshot& snapshot, const std::vector<std::string>& protect, bool force) {
  PlanPolicy policy = PlanPolicy::for_current_process(snapshot);
  policy.force = force;
  for (const auto& name : protect) policy.protect.add(name);
  return policy;
}

PreparedKill prepare_kill(Snapshot& snapshot, const Selection& selection, PlanPolicy policy, bool tree) {
  PreparedKill prepared;
  prepared.policy = std::move(policy);
  prepared.plan = plan_selected(snapshot, selection, prepared.policy, tree);
  prepared.pins = pin_targets(prepared.plan, snapshot);
  return prepared;
}

KillReport planned_report(const KillPlan& plan, const ExecutionOptions& execution) {
  KillReport report;
  report.settings.signal = signal_name(execution.engine.first_signal);
  report.settings.timeout_s = std::chrono::duration<double>(execution.engine.timeout).count();
  report.settings.escalate = execution.engine.escalate;
  report.settings.group = execution.group;
  report.settings.tree = execution.tree;
  report.targets = planned_outcomes(plan);
  return report;
}

void carry_out_kill(PreparedKill& prepared, SnapshotSource& source, const Snapshot& snapshot,
                    const CarryOutOptions& options, KillReport& report) {
  execute_plan(prepared.plan, prepared.pins, snapshot, prepared.policy, options.execution, options.audit, report);
  if (report.interrupted_by != 0 || options.release != ReleaseCheck::Kill) return;
  verify_after_kill(prepared.plan, source, snapshot, options.verify_timeout_s, report,
                    options.execution.engine.interruption);
}

}  // namespace gpureap
