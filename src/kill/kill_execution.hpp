// Carrying out a kill plan: the pinned targets go through the escalation ladder (trees and
// groups swept only where nothing in them must be spared), the engine's results are merged
// into the report, and zombies' parents get SIGCHLD when asked. Every signal is audited.
#pragma once

#include <map>

#include "audit/audit_log.hpp"
#include "kill/escalation.hpp"
#include "kill/kill_plan.hpp"
#include "kill/kill_outcome.hpp"
#include "kill/pid_ref.hpp"
#include "kill/zombie_parent.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

struct ExecutionOptions {
  EscalationOptions engine;
  bool tree = true;
  bool group = false;
  bool reap_zombies = false;
};

// What became of a target that could not be pinned (status other than Ok): gone, reused, or a
// failure (no pidfd_open, EMFILE...) that is reported as a survivor, never left out.
void describe_unpinned(pid_t pid, const PinResult& pin, TargetOutcome& outcome);

// The audit of a ladder into `audit` (none when null): each step's lines appended, then one sync.
AuditHooks audit_hooks(const AuditLog* audit);

// `pins` holds a pin for every actionable target of the plan (taken right after the snapshot);
// `report.targets` starts as planned_outcomes(plan) and ends with what happened to each, plus
// the processes that joined during the kill. Throws std::runtime_error when the audit log
// cannot be written (no further signal is sent).
void execute_plan(const KillPlan& plan, std::map<pid_t, PinResult>& pins, const Snapshot& snapshot,
                  const PlanPolicy& policy, const ExecutionOptions& options, const AuditLog* audit,
                  KillReport& report);

}  // namespace gpureap
