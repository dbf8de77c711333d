#include "kill/kill_execution.hpp"
#include "text/signal_names.hpp"

#include <cerrno>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "kill/mps_client_ending.hpp"

namespace gpureap {
namespace {

// A target that will be signalled: actionable (or a zombie, which a signal cannot harm) and not
// an MPS client held back because its terminate_client failed.
bool will_signal(const PlannedTarget& t, const std::set<pid_t>& held_back) {
  return (t.actionable() || t.zombie()) && held_back.count(t.pid) == 0;
}

// Group mode: the engine signals a whole group only when everything we saw in it may be
// signalled; otherwise members are signalled one by one and the rest are reported.
std::set<pid_t> whole_groups(const KillPlan& plan, const Snapshot& snapshot, const std::set<pid_t>& held_back) {
  std::set<pid_t> groups;
  std::set<pid_t> blocked;
  const pid_t own_group = getpgrp();
  for (const auto& t : plan.targets) {
    if (t.pgid > 1 && will_signal(t, held_back)) groups.insert(t.pgid);
  }
  for (const auto& [member_pid, info] : snapshot.table.processes()) {
    const pid_t pid = member_pid;  // a structured binding cannot be captured before C++20 in clang 14
    if (!groups.count(info.pgid)) continue;
    const auto it = std::find_if(plan.targets.begin(), plan.targets.end(), [&](const PlannedTarget& t) { return t.pid == pid; });
    if (it == plan.targets.end() || !will_signal(*it, held_back)) blocked.insert(info.pgid);
  }
  groups.erase(own_group);
  for (pid_t g : blocked) groups.erase(g);
  return groups;
}

// The engine's sweep signals every descendant of a swept target, including ones the plan left
// out. Sweep only where no descendant (and no member of its process group) is refused,
// forbidden or protected.
bool sweep_is_safe(pid_t root, const KillPlan& plan, const Snapshot& snapshot, const PlanPolicy& policy,
                   const std::set<pid_t>& held_back) {
  // The sweep freezes with SIGSTOP. If the group leader dies while a member is stopped, the
  // kernel sends the now orphaned process group SIGHUP and SIGCONT: every member, spared ones
  // included. So no freeze where the target's group holds a process that must be spared.
  const ProcessInfo* root_process = snapshot.table.find(root);
  if (root_process != nullptr && root_process->pgid > 1) {
    for (const auto& [member_pid, info] : snapshot.table.processes()) {
      const pid_t pid = member_pid;  // captured below: clang 14 cannot capture a structured binding
      if (info.pgid != root_process->pgid || pid == root) continue;
      const auto it = std::find_if(plan.targets.begin(), plan.targets.end(), [&](const PlannedTarget& t) { return t.pid == pid; });
      if (it != plan.targets.end() ? !will_signal(*it, held_back) : (!policy.force && policy.protect.match(info))) {
        return false;
      }
    }
  }
  for (const pid_t pid : snapshot.table.descendants_of(root)) {
    const auto it = std::find_if(plan.targets.begin(), plan.targets.end(), [&](const PlannedTarget& t) { return t.pid == pid; });
    if (it != plan.targets.end()) {
      if (!will_signal(*it, held_back)) return false;
      continue;
    }
    const ProcessInfo* process = snapshot.table.find(pid);
    if (process == nullptr) continue;
    if (!policy.force && policy.protect.match(*process)) return false;
    if (pid == policy.self ||
        std::find(policy.self_ancestry.begin(), policy.self_ancestry.end(), pid) != policy.self_ancestry.end()) {
      continue;  // the engine never signals gpureap or its ancestors
    }
    if (!may_signal(*process, policy)) return false;
  }
  return true;
}

// An MPS client: terminate_client through its control daemon before any signal. False when
// that failed and the client must not be signalled: its outcome is then a refusal saying why.
bool end_mps_work_first(const PlannedTarget& t, const PlanPolicy& policy, const ExecutionOptions& options,
                        KillReport& report, TargetOutcome& outcome) {
  const MpsClientEnding ending = end_mps_client_work(t.mps_link, policy.force, options.engine.timeout, options.engine.proc_root);
  if (ending.may_signal) {
    report.notes.push_back(ending.note);
    return true;
  }
  outcome.outcome = KillOutcome::Refused;
  outcome.detail = ending.refusal + ", or add --force";
  return false;
}

}  // namespace

void describe_unpinned(pid_t pid, const PinResult& pin, TargetOutcome& outcome) {
  switch (pin.status) {
    case PinStatus::Ok:
      break;
    case PinStatus::Gone:
      outcome.outcome = KillOutcome::AlreadyGone;
      outcome.detail = "it had exited before it could be pinned";
      break;
    case PinStatus::IdentityChanged:
      outcome.outcome = KillOutcome::IdentityChanged;
      outcome.detail = fmt::format("PID {} now names another process (it started at another time): not signalled", pid);
      break;
    case PinStatus::Unsupported:
      outcome.outcome = KillOutcome::Survived;
      outcome.detail = "this kernel has no pidfd_open (Linux < 5.3): gpureap refuses to signal by bare PID";
      break;
    case PinStatus::Error:
      outcome.outcome = KillOutcome::Survived;
      outcome.detail = fmt::format("cannot pin PID {}: {}: not signalled", pid, std::strerror(pin.error));
      if (pin.error == EMFILE || pin.error == ENFILE) {
        outcome.detail += "; raise the open-file limit (ulimit -n) and run gpureap again";
      }
      break;
  }
}

// The step's lines are appended, then synced once before its signals go out.
AuditHooks audit_hooks(const AuditLog* audit) {
  AuditHooks hooks;
  if (audit == nullptr) return hooks;
  hooks.before = [audit](const SignalEvent& event) {
    audit->append(AuditRecord{AuditStage::Sending, event.pid, event.start_time_ticks, event.signal, event.reason, 0});
  };
  hooks.after = [audit](const SignalEvent& event) {
    audit->append(
        AuditRecord{AuditStage::Sent, event.pid, event.start_time_ticks, event.signal, event.reason, event.result_errno});
  };
  hooks.flush = [audit]() { audit->sync(); };
  return hooks;
}

namespace {

// One plan's execution: what each step reads, and the report they fill in.
struct Execution {
  const KillPlan& plan;
  const Snapshot& snapshot;
  const PlanPolicy& policy;
  const ExecutionOptions& options;
  const AuditLog* audit;
  KillReport& report;
  std::map<pid_t, std::size_t> index_of;  // a target's place in plan.targets and report.targets

  const PlannedTarget& target(pid_t pid) const { return plan.targets[index_of.at(pid)]; }
  TargetOutcome& outcome(pid_t pid) { return report.targets[index_of.at(pid)]; }
};

// MPS clients first, before anything is signalled: one whose terminate_client failed is held
// back from everything that follows — its own ladder, a whole-group signal, any tree sweep.
// A server that serves a held-back client is held back too: signalling it would end that work.
std::set<pid_t> end_mps_work_or_hold_back(Execution& run, const std::map<pid_t, PinResult>& pins) {
  std::set<pid_t> held_back;
  for (const auto& [pid, pin] : pins) {
    const PlannedTarget& t = run.target(pid);
    if (pin.status == PinStatus::Ok && t.mps_client &&
        !end_mps_work_first(t, run.policy, run.options, run.report, run.outcome(pid))) {
      held_back.insert(pid);
    }
  }
  for (const auto& t : run.plan.targets) {
    if (!t.mps_server_role || !t.actionable()) continue;
    std::vector<pid_t> kept = mps_clients_served_by(run.snapshot, t.pid, false);
    std::erase_if(kept, [&](pid_t client) { return held_back.count(client) == 0; });
    if (kept.empty()) continue;
    held_back.insert(t.pid);
    auto& outcome = run.outcome(t.pid);
    outcome.outcome = KillOutcome::Refused;
    outcome.detail = fmt::format("not signalled: MPS server {} serves {}, whose work could not be ended first; "
                                 "ending the server would end it too",
                                 t.pid, pids_with_users(run.snapshot, kept));
  }
  return held_back;
}

// The engine's two ladders: MPS servers run after every other target has ended.
struct Ladders {
  std::vector<EscalationTarget> others;
  std::vector<EscalationTarget> servers;
};

// Each pinned target not held back, with its sweep and group decided; the rest described.
Ladders ladders_for(Execution& run, std::map<pid_t, PinResult>& pins, const std::set<pid_t>& held_back) {
  const std::set<pid_t> groups =
      run.options.group ? whole_groups(run.plan, run.snapshot, held_back) : std::set<pid_t>{};
  std::set<pid_t> group_given;
  Ladders ladders;
  for (auto& [pid, pin] : pins) {
    if (pin.status != PinStatus::Ok) {
      describe_unpinned(pid, pin, run.outcome(pid));
      continue;
    }
    if (held_back.count(pid)) continue;
    const PlannedTarget& t = run.target(pid);
    EscalationTarget target;
    target.ref = std::move(pin.ref);
    target.sweep_descendants = run.options.tree && sweep_is_safe(pid, run.plan, run.snapshot, run.policy, held_back);
    if (run.options.tree && !target.sweep_descendants) {
      run.report.notes.push_back(fmt::format(
          "descendants of {} were not swept during the kill because one of them must not be signalled: "
          "a child forked meanwhile could escape",
          pid));
    }
    target.reason = t.reason;
    if (groups.count(t.pgid) && !group_given.count(t.pgid)) {
      target.process_group = t.pgid;
      group_given.insert(t.pgid);
    }
    (t.mps_server_role ? ladders.servers : ladders.others).push_back(std::move(target));
  }
  return ladders;
}

// Runs the ladders in turn; an interruption stops the rest and is said in the report.
std::vector<TargetResult> run_ladders(Execution& run, Ladders ladders) {
  const AuditHooks hooks = audit_hooks(run.audit);
  std::vector<TargetResult> results;
  for (auto* batch : {&ladders.others, &ladders.servers}) {
    if (batch->empty() || run.report.interrupted_by != 0) continue;
    EscalationRun ladder = run_ladder(std::move(*batch), run.options.engine, hooks);
    results.insert(results.end(), std::make_move_iterator(ladder.results.begin()),
                   std::make_move_iterator(ladder.results.end()));
    run.report.interrupted_by = ladder.interrupted_by;
    if (ladder.interrupted_by != 0) {
      run.report.notes.push_back(fmt::format(
          "interrupted by {}: gpureap stopped signalling; every process it had stopped was continued, "
          "and targets not yet ended were left running",
          signal_name(ladder.interrupted_by)));
    }
  }
  return results;
}

// The engine's results into the report: planned targets' outcomes, and a line for each
// process that joined during the kill.
void record_results(Execution& run, const std::vector<TargetResult>& results) {
  for (const auto& r : results) {
    TargetOutcome* outcome = nullptr;
    if (auto it = run.index_of.find(r.pid); it != run.index_of.end()) {
      outcome = &run.report.targets[it->second];
    } else {
      run.report.targets.push_back(TargetOutcome{});
      outcome = &run.report.targets.back();
      outcome->pid = r.pid;
      outcome->discovered = true;
      run.index_of[r.pid] = run.report.targets.size() - 1;
    }
    outcome->outcome = r.outcome;
    outcome->signals = r.signals;
    outcome->exit_ms = r.exit_ms;
    if (r.final_state != '?') outcome->final_state = r.final_state;
    outcome->wchan = r.wchan;
    outcome->cgroup_killed = r.cgroup_killed;
    outcome->resumed_parent = r.resumed_parent;
    outcome->discovered = outcome->discovered || r.discovered;
    if (r.outcome == KillOutcome::PermissionDenied) {
      const auto planned = std::find_if(run.plan.targets.rbegin(), run.plan.targets.rend(),
                                        [&](const PlannedTarget& p) { return p.pid == r.pid; });
      outcome->detail = planned != run.plan.targets.rend() && planned->uid
                            ? permission_denied_text(r.pid, planned->user, *planned->uid)
                            : fmt::format("permission denied: signalling PID {} needs root or its owner", r.pid);
    } else if (!r.detail.empty()) {
      outcome->detail = r.detail;
    }
  }
  // Targets handed to the engine that it did not report on are still planned: say so.
  for (auto& o : run.report.targets) {
    if (o.outcome == KillOutcome::Planned) {
      o.outcome = KillOutcome::Survived;
      o.detail = "the escalation reported nothing for it";
    }
  }
}

// --reap-zombies: SIGCHLD to each zombie's parent, unless the parent was ended with the targets.
void nudge_zombie_parents(Execution& run) {
  for (const auto& t : run.plan.targets) {
    if (!t.zombie() || t.refusal != Refusal::None) continue;
    auto& outcome = run.outcome(t.pid);
    if (run.index_of.count(t.ppid) && run.outcome(t.ppid).outcome != KillOutcome::Refused) {
      outcome.detail = fmt::format("its parent PID {} was ended with the other targets: init reaps it", t.ppid);
      continue;
    }
    const ProcessInfo* parent = run.snapshot.table.find(t.ppid);
    if (parent == nullptr) continue;
    const NudgeResult nudge =
        nudge_zombie_parent(t.ppid, parent->start_time_ticks, run.snapshot.table.options().proc_root,
                            fmt::format("--reap-zombies: parent of zombie {}", t.pid), run.audit);
    if (nudge.status == NudgeStatus::NotPinned) continue;
    outcome.detail = nudge.status == NudgeStatus::Sent
                         ? fmt::format("SIGCHLD sent to its parent PID {} ({})", t.ppid, parent->comm)
                         : fmt::format("SIGCHLD to its parent PID {} failed: {}", t.ppid, std::strerror(nudge.error));
    outcome.detail += "; if the parent does not reap it, end the parent: gpureap kill " + std::to_string(t.ppid);
  }
}

}  // namespace

void execute_plan(const KillPlan& plan, std::map<pid_t, PinResult>& pins, const Snapshot& snapshot,
                  const PlanPolicy& policy, const ExecutionOptions& options, const AuditLog* audit,
                  KillReport& report) {
  Execution run{plan, snapshot, policy, options, audit, report, {}};
  for (std::size_t i = 0; i < plan.targets.size(); ++i) run.index_of[plan.targets[i].pid] = i;
  const std::set<pid_t> held_back = end_mps_work_or_hold_back(run, pins);
  record_results(run, run_ladders(run, ladders_for(run, pins, held_back)));
  if (options.reap_zombies && report.interrupted_by == 0) nudge_zombie_parents(run);
}

}  // namespace gpureap
