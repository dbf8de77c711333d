// What `gpureap kill` tells a person and a script: the plan before acting, one line per
// target afterwards (how it ended, in how many ms), the memory verification per GPU, the JSON
// schema "gpureap.kill/1" (docs/kill-json.md) and the exit status (docs/exit-codes.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/terminal_style.hpp"
#include "kill/kill_plan.hpp"
#include "kill/memory_verification.hpp"

namespace gpureap {

inline constexpr const char* kKillSchema = "gpureap.kill/1";

struct TargetOutcome {
  pid_t pid = 0;
  // "exited", "killed", "already-gone", "zombie", "stuck-in-d", "survived", "permission-denied",
  // "identity-changed", "refused", or "planned" (dry run).
  std::string outcome;
  std::vector<std::string> signals;
  std::optional<double> exit_ms;
  char final_state = '?';
  std::string wchan;
  bool discovered = false;  // joined during the kill (forked meanwhile): not in the plan
  std::string detail;
  std::string cgroup_killed;  // its tree was its own cgroup v2, ended with cgroup.kill
};

struct KillSettings {
  std::string signal = "SIGTERM";
  double timeout_s = 10;
  bool escalate = true;
  bool verify = true;
  bool dry_run = false;
  bool group = false;
  bool tree = true;
};

struct KillReport {
  KillSettings settings;
  std::vector<TargetOutcome> targets;   // planned targets first (plan order), then discovered
  std::vector<GpuVerification> gpus;    // empty with --dry-run or --no-verify: see settings
  std::vector<std::string> notes;       // e.g. reaped zombies, driver unreadable
};

// The outcomes a plan implies before acting: refused, permission-denied, zombie, or planned.
std::vector<TargetOutcome> planned_outcomes(const KillPlan& plan);

// 0 only when every target ended and (with verification) the memory was verified free.
int kill_exit_status(const KillReport& report);

std::string render_plan(const KillPlan& plan, const KillSettings& settings, const TerminalStyle& style);
std::string render_results(const KillPlan& plan, const KillReport& report, const TerminalStyle& style);
nlohmann::ordered_json kill_report_json(const KillPlan& plan, const KillReport& report);

}  // namespace gpureap
