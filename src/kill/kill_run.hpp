// The kill pipeline that kill, reap, top, watch and doctor --fix share, over one snapshot: load
// the details the plan needs, pin the actionable targets, run the ladder and verify the release.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "audit/audit_log.hpp"
#include "kill/kill_execution.hpp"
#include "kill/kill_plan.hpp"
#include "kill/kill_outcome.hpp"
#include "kill/memory_verification.hpp"
#include "kill/pid_ref.hpp"
#include "kill/target_selection.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

// AMD and Intel GPUs: polls sysfs and fdinfo until the plan's clients are gone and their memory
// released (no wait when `survivor`). Fills report.drm_gpus.
void verify_drm_after_kill(const KillPlan& plan, const SnapshotSource& source, double verify_timeout_s,
                           bool survivor, const Interruption& interruption, KillReport& report);

// PIDs a caller chose on its own proof (doctor's orphans, a watch rule's match), ended through
// the whole pipeline: select with their trees, plan (protection, identity, permission), pin,
// the ladder (SIGTERM, SIGKILL after the timeout; every signal audited) and, unless a signal
// interrupted the ladder (report.interrupted_by), the driver's verification of the release.
struct EndRequest {
  std::vector<pid_t> pids;
  std::string reason;                // the audit log's reason for these PIDs; "" keeps the selection's
  double timeout_s = 10;
  double verify_timeout_s = 30;
  std::vector<std::string> protect;  // added to the built-in protected names
  const AuditLog* audit = nullptr;
  Interruption interruption;  // what stops the ladder early (the caller's signals); none: never
};

struct EndResult {
  KillPlan plan;
  KillReport report;
};

// Throws std::runtime_error when the audit log cannot be written (no further signal was sent).
EndResult end_chosen_pids(SnapshotSource& source, Snapshot& snapshot, const EndRequest& request);

// The same pipeline in two steps, for a caller that shows the plan and asks before acting
// (kill, reap, top): the policy, with the caller's protected names (`force`: protection does not
// hold; identity checks always do) ...
PlanPolicy kill_policy(const Snapshot& snapshot, const std::vector<std::string>& protect, bool force = false);

// ... the plan under it (`tree`: a target's descendants and process group are taken with it) and
// its targets pinned ...
struct PreparedKill {
  PlanPolicy policy;
  KillPlan plan;
  std::map<pid_t, PinResult> pins;
};
PreparedKill prepare_kill(Snapshot& snapshot, const Selection& selection, PlanPolicy policy, bool tree = true);

// ... the report the ladder starts from: its settings and each target as planned (what a dry
// run shows) ...
KillReport planned_report(const KillPlan& plan, const ExecutionOptions& execution);

// How the release is checked after the ladder: kill's check (the driver's memory and the AMD
// and Intel clients), or none where the caller checks on its own terms (reap's baselines).
enum class ReleaseCheck { Kill, Caller };

struct CarryOutOptions {
  ExecutionOptions execution;
  double verify_timeout_s = 30;
  ReleaseCheck release = ReleaseCheck::Kill;
  const AuditLog* audit = nullptr;
};

// ... then the ladder over the pinned targets and, unless a signal interrupted it, the release
// check into `report` (from planned_report). Throws std::runtime_error when the audit log
// cannot be written (no further signal was sent).
void carry_out_kill(PreparedKill& prepared, SnapshotSource& source, const Snapshot& snapshot,
                    const CarryOutOptions& options, KillReport& report);

}  // namespace gpureap
