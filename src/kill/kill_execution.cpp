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

void execute_plan(const KillPlan& plan, std::map<pid_t, PinResult>& pins, const Snapshot& snapshot,
                  const PlanPolicy& policy, const ExecutionOptions& options, const AuditLog* audit,
                  KillReport& report) {
  std::map<pid_t, std::size_t> index_of;
  for (std::size_t i = 0; i < plan.targets.size(); ++i) index_of[plan.targets[i].pid] = i;
  // MPS clients first, before anything is signalled: one whose terminate_client failed is held
  // back from everything that follows — its own ladder, a whole-group signal, any tree sweep.
  std::set<pid_t> held_back;
  for (const auto& [pid, pin] : pins) {
    const PlannedTarget& t = plan.targets[index_of[pid]];
    if (pin.status == PinStatus::Ok && t.mps_client &&
        !end_mps_work_first(t, policy, options, report, report.targets[index_of[pid]])) {
      held_back.insert(pid);
    }
  }
  // A server signalled would end the work of a held-back client: it is held back too.
  for (const auto& t : plan.targets) {
    if (!t.mps_server_role || !t.actionable()) continue;
    std::vector<pid_t> kept = mps_clients_served_by(snapshot, t.pid, false);
    std::erase_if(kept, [&](pid_t client) { return held_back.count(client) == 0; });
    if (kept.empty()) continue;
    held_back.insert(t.pid);
    auto& outcome = report.targets[index_of[t.pid]];
    outcome.outcome = KillOutcome::Refused;
    outcome.detail = fmt::format("not signalled: MPS server {} serves {}, whose work could not be ended first; "
                                 "ending the server would end it too",
                                 t.pid, pids_with_users(snapshot, kept));
  }
  const std::set<pid_t> groups = options.group ? whole_groups(plan, snapshot, held_back) : std::set<pid_t>{};
  std::set<pid_t> group_given;
  std::vector<EscalationTarget> escalation;
  std::vector<EscalationTarget> servers;  // MPS servers: after every other target has ended
  for (auto& [pid, pin] : pins) {
    auto& outcome = report.targets[index_of[pid]];
    const PlannedTarget& t = plan.targets[index_of[pid]];
    switch (pin.status) {
      case PinStatus::Ok: {
        if (held_back.count(pid)) break;
        EscalationTarget target;
        target.ref = std::move(pin.ref);
        target.sweep_descendants = options.tree && sweep_is_safe(pid, plan, snapshot, policy, held_back);
        if (options.tree && !target.sweep_descendants) {
          report.notes.push_back(fmt::format(
              "descendants of {} were not swept during the kill because one of them must not be signalled: "
              "a child forked meanwhile could escape",
              pid));
        }
        target.reason = t.reason;
        if (groups.count(t.pgid) && !group_given.count(t.pgid)) {
          target.process_group = t.pgid;
          group_given.insert(t.pgid);
        }
        (t.mps_server_role ? servers : escalation).push_back(std::move(target));
        break;
      }
      case PinStatus::Gone:
      case PinStatus::IdentityChanged:
      case PinStatus::Unsupported:
      case PinStatus::Error:
        describe_unpinned(pid, pin, outcome);
        break;
    }
  }

  const AuditHooks hooks = audit_hooks(audit);
  std::vector<TargetResult> results;
  for (auto* batch : {&escalation, &servers}) {
    if (batch->empty() || report.interrupted_by != 0) continue;
    EscalationRun run = run_ladder(std::move(*batch), options.engine, hooks);
    results.insert(results.end(), std::make_move_iterator(run.results.begin()),
                   std::make_move_iterator(run.results.end()));
    report.interrupted_by = run.interrupted_by;
    if (run.interrupted_by != 0) {
      report.notes.push_back(fmt::format(
          "interrupted by {}: gpureap stopped signalling; every process it had stopped was continued, "
          "and targets not yet ended were left running",
          signal_name(run.interrupted_by)));
    }
  }
  for (const auto& r : results) {
    TargetOutcome* outcome = nullptr;
    if (auto it = index_of.find(r.pid); it != index_of.end()) {
      outcome = &report.targets[it->second];
    } else {
      report.targets.push_back(TargetOutcome{});
      outcome = &report.targets.back();
      outcome->pid = r.pid;
      outcome->discovered = true;
      index_of[r.pid] = report.targets.size() - 1;
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
      const PlannedTarget* t = nullptr;
      for (const auto& p : plan.targets) {
        if (p.pid == r.pid) t = &p;
      }
      outcome->detail = t != nullptr && t->uid
                            ? permission_denied_text(r.pid, t->user, *t->uid)
                            : fmt::format("permission denied: signalling PID {} needs root or its owner", r.pid);
    } else if (!r.detail.empty()) {
      outcome->detail = r.detail;
    }
  }
  // Targets handed to the engine that it did not report on are still planned: say so.
  for (auto& o : report.targets) {
    if (o.outcome == KillOutcome::Planned) {
      o.outcome = KillOutcome::Survived;
      o.detail = "the escalation reported nothing for it";
    }
  }

  // Zombies: SIGCHLD to the parent when asked, unless the parent was ended above.
  if (options.reap_zombies && report.interrupted_by == 0) {
    for (const auto& t : plan.targets) {
      if (!t.zombie() || t.refusal != Refusal::None) continue;
      auto& outcome = report.targets[index_of[t.pid]];
      if (index_of.count(t.ppid) && report.targets[index_of[t.ppid]].outcome != KillOutcome::Refused) {
        outcome.detail = fmt::format("its parent PID {} was ended with the other targets: init reaps it", t.ppid);
        continue;
      }
      const ProcessInfo* parent = snapshot.table.find(t.ppid);
      if (parent == nullptr) continue;
      const NudgeResult nudge =
          nudge_zombie_parent(t.ppid, parent->start_time_ticks, snapshot.table.options().proc_root,
                              fmt::format("--reap-zombies: parent of zombie {}", t.pid), audit);
      if (nudge.status == NudgeStatus::NotPinned) continue;
      outcome.detail = nudge.status == NudgeStatus::Sent
                           ? fmt::format("SIGCHLD sent to its parent PID {} ({})", t.ppid, parent->comm)
                           : fmt::format("SIGCHLD to its parent PID {} failed: {}", t.ppid, std::strerror(nudge.error));
      outcome.detail += "; if the parent does not reap it, end the parent: gpureap kill " + std::to_string(t.ppid);
    }
  }
}

}  // namespace gpureap
