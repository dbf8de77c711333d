// What `gpureap kill` did, as values: how each target ended, the settings it ran with and the
// memory verification per GPU. Rendering, JSON and exit statuses are the CLI's (cli/kill_render).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kill/escalation.hpp"
#include "kill/kill_plan.hpp"
#include "kill/drm_verification.hpp"
#include "kill/memory_verification.hpp"

namespace gpureap {

struct TargetOutcome {
  pid_t pid = 0;
  KillOutcome outcome = KillOutcome::Planned;
  std::vector<std::string> signals;
  std::optional<double> exit_ms;
  char final_state = '?';
  std::string wchan;
  bool discovered = false;  // joined during the kill (forked meanwhile): not in the plan
  std::string detail;
  std::string cgroup_killed;  // its tree was its own cgroup v2, ended with cgroup.kill
  std::optional<ResumedParent> resumed_parent;  // its parent mirrored the freeze's stop: continued
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
  std::vector<DrmGpuVerification> drm_gpus;  // AMD and Intel GPUs, the same way
  std::vector<std::string> notes;       // e.g. reaped zombies, driver unreadable
  int interrupted_by = 0;  // the signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) that stopped the ladder; 0: none
};

// A target that is still running, as a person reads it: "survived every signal" only when
// signals were sent; one never signalled (an MPS client left alone, a process that could not be
// pinned) is "not signalled".
std::string survivor_words(const TargetOutcome& outcome, const KillSettings& settings);

// The outcomes a plan implies before acting: refused, permission-denied, zombie, or planned.
std::vector<TargetOutcome> planned_outcomes(const KillPlan& plan);

// How a kill ended as a whole, worst first; the CLI maps it to an exit status.
enum class KillVerdict { Interrupted, NotFreed, PermissionDenied, Refused, Ok };
// Ok only when every target ended and (with verification) the memory was verified free.
KillVerdict kill_verdict(const KillReport& report);

}  // namespace gpureap
