// Ending processes from the view, in kill's own terms: what the person chose becomes a kill
// Selection over a fresh snapshot (a tagged process that has since exited, or whose PID now
// names another process, is left out and said so), kill's plan decides what will be signalled
// and what refused, and the confirmation shows exactly that plan, then one line of outcome.
#pragma once

#include <string>
#include <vector>

#include "kill/kill_execution.hpp"
#include "kill/kill_outcome.hpp"
#include "kill/kill_plan.hpp"
#include "kill/target_selection.hpp"
#include "snapshot/snapshot.hpp"
#include "top/top_row.hpp"

namespace gpureap {

// The four ways offered to end the chosen processes.
enum class Ladder {
  TermThenKill,  // SIGTERM, wait, then SIGKILL (kill's default)
  TermOnly,      // SIGTERM, never escalated
  IntOnly,       // SIGINT (what Ctrl-C sends: a training script's KeyboardInterrupt handler runs)
  KillNow,       // SIGKILL at once
};
std::string ladder_words(Ladder ladder, double timeout_s);  // "SIGTERM, then SIGKILL after 10 s"
EscalationOptions escalation_for(Ladder ladder, double timeout_s, const std::string& proc_root);

// Kill's selection for the processes chosen in the view, checked against `fresh`. A dead
// owner's row (exited, its context kept by forked holders) stands for those holders. What was
// left out, and why, goes to `notes`.
Selection select_for_view(const Snapshot& fresh, const std::vector<ProcessKey>& chosen, std::vector<std::string>& notes);

struct PreviewEntry {
  pid_t pid = 0;
  std::string who;   // "alice  python train.py" (sanitised)
  std::string why;   // why it is in the plan, or why it is refused (sanitised)
};

struct KillPreview {
  std::vector<PreviewEntry> signalled;
  std::vector<PreviewEntry> refused;  // refused by policy, not permitted, zombies, not visible
  std::vector<std::string> memory;    // "GPU 0: 2.0 GiB expected back (now 12.5 GiB used)"
  std::vector<std::string> notes;     // left out since chosen
  bool anything_to_signal() const { return !signalled.empty(); }
};

KillPreview preview_plan(const KillPlan& plan, std::vector<std::string> notes);

// One line for the status bar: each target's outcome and each GPU's verification, e.g.
// "PID 812 exited after SIGTERM (14 ms) · GPU 0: 2.0 GiB verified free in 41 ms".
std::string kill_status_line(const KillReport& report);
// Whether the line reports success (everything ended and verified).
bool kill_succeeded(const KillReport& report);

}  // namespace gpureap
