// The escalation ladder over a set of pinned processes: first signal (SIGTERM by default),
// SIGCONT to stopped ones so they can handle it, wait for exit by polling the pidfds (no
// sleep loops), SIGKILL at the timeout. Trees and groups are swept so that a process forked
// during the kill cannot escape. Every signal goes through an AuditSink first.
//
// Trees and groups: every member is SIGSTOPped as it is found (pinned by pidfd + start time
// the moment it is seen), sweeping again until a sweep finds no new PID and all members have
// stopped; then the first signal to all, then SIGCONT to all. Before SIGKILL the live members
// are stopped and swept once more (they ran again after SIGCONT), so a swept root's signals
// read SIGSTOP, SIGTERM, SIGCONT, SIGSTOP, SIGKILL. When a swept tree is exactly its own
// cgroup v2 (checked while it is frozen), the SIGKILL step also writes cgroup.kill, which
// takes even a child forked after the SIGCONT whose parent then exited (reparented out of
// the tree). Without such a cgroup that one case remains a gap of the sweep; process groups
// (scanned by pgid) do not have it.
// The engine itself refuses (outcome Refused, nothing sent) PID <= 1, gpureap and its
// ancestors, kernel threads and targets without a valid pidfd.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "kill/pid_ref.hpp"

namespace gpureap {

enum class KillOutcome {
  ExitedAfterSignal,  // ended within the timeout after the first signal
  Killed,             // ended after SIGKILL
  AlreadyGone,        // had exited before we signalled
  Zombie,             // already a zombie: holds no memory; its parent has not reaped it
  StuckInD,           // still alive after SIGKILL, in uninterruptible sleep (see wchan)
  Survived,           // still alive after everything (no escalation asked, or unkillable)
  PermissionDenied,   // EPERM from pidfd_send_signal
  IdentityChanged,    // the PID now names another process: skipped, nothing sent
  Refused,            // never signalled by policy (set by the caller, not the engine)
  Planned,            // a dry run: would be signalled (never set by the engine)
};
std::string kill_outcome_name(KillOutcome outcome);  // "exited", "killed", "already-gone", ...

struct EscalationTarget {
  PidRef ref;                      // must be valid; the engine only signals through it
  bool sweep_descendants = false;  // also pin and signal children that appear meanwhile
  std::optional<pid_t> process_group;  // signal this whole group (members pinned as found)
  std::string reason;              // why it was selected (for the audit log)
};

struct EscalationOptions {
  int first_signal = 15;  // SIGTERM
  std::chrono::milliseconds timeout{10000};
  bool escalate = true;   // SIGKILL after the timeout
  std::chrono::milliseconds kill_grace{2000};  // how long to wait after SIGKILL before judging
  std::string proc_root = "/proc";
};

struct TargetResult {
  pid_t pid = 0;
  KillOutcome outcome = KillOutcome::Survived;
  std::vector<std::string> signals;  // names sent, in order: "SIGTERM", "SIGCONT", "SIGKILL"
  std::optional<double> exit_ms;     // from the first signal to the exit, when seen
  char final_state = '?';            // state when last seen alive ('D', 'Z', ...)
  std::string wchan;                 // for StuckInD
  bool discovered = false;           // joined during the kill (a child forked meanwhile)
  std::string detail;                // errno text, the zombie's parent, ...
  std::string cgroup_killed;         // the cgroup v2 directory killed with cgroup.kill, if any
};

// One line per signal, written and flushed before the engine moves on (audit log).
struct SignalEvent {
  pid_t pid = 0;
  std::uint64_t start_time_ticks = 0;
  int signal = 0;
  std::string reason;
  int result_errno = 0;  // 0 = delivered
};
using AuditSink = std::function<void(const SignalEvent&)>;

// Results: one per target, in the order given, then one per process discovered in a tree or
// group (discovered=true), in the order found. `audit` is called before each signal (if it
// throws, that signal is not sent and the exception propagates, after a best-effort SIGCONT to
// processes the freeze had stopped); `audit_result`, when set, after each send with
// result_errno filled in.
std::vector<TargetResult> run_escalation(std::vector<EscalationTarget> targets, const EscalationOptions& options,
                                         const AuditSink& audit = {}, const AuditSink& audit_result = {});

std::string signal_name(int signal);          // 15 -> "SIGTERM"
std::optional<int> parse_signal(const std::string& text);  // "TERM", "SIGTERM", "15" -> 15

}  // namespace gpureap
