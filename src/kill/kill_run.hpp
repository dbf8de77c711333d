// The kill pipeline's steps that `kill` and `doctor --fix` share, over one snapshot: load the
// details the plan needs, pin the actionable targets, and verify the release after the ladder.
#pragma once

#include <map>
#include <vector>

#include "kill/kill_plan.hpp"
#include "kill/kill_outcome.hpp"
#include "kill/memory_verification.hpp"
#include "kill/pid_ref.hpp"
#include "kill/target_selection.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

// Loads status/cmdline/... for every selected process and (with `tree`) its descendants:
// the sweep's safety check looks at each of them. Then builds the plan.
KillPlan plan_selected(Snapshot& snapshot, const Selection& selection, const PlanPolicy& policy, bool tree);

// Pins every actionable target from the start time the snapshot read: whatever happens to the
// PIDs afterwards, only these processes can receive our signals. Raises RLIMIT_NOFILE to its
// hard limit first; a target that still finds no descriptor fails with EMFILE (reported).
std::map<pid_t, PinResult> pin_targets(const KillPlan& plan, const Snapshot& snapshot);

// Polls the driver through `source` until the plan's memory is released (no wait when a
// target survived: waiting cannot help). Fills report.gpus, or a note when the driver is gone.
void verify_after_kill(const KillPlan& plan, SnapshotSource& source, const Snapshot& snapshot,
                       double verify_timeout_s, KillReport& report);

}  // namespace gpureap
