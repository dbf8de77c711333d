// The escalation ladder over a set of pinned processes, in five steps a reader can follow
// top to bottom (escalation.cpp, run_ladder):
//
//   freeze    swept trees and groups stop: their own cgroup v2 frozen with cgroup.freeze when
//             the tree owns it, otherwise SIGSTOP to each member as it is found, sweeping
//             again until a sweep finds no new PID (ladder_freeze.cpp)
//   signal    the first signal (SIGTERM by default) to every member, then SIGCONT / thaw so
//             that they can handle it
//   wait      poll the pidfds until they exit or the timeout passes (no sleep loops)
//   escalate  freeze again (they ran since), SIGKILL the survivors; cgroup.kill only for a
//             cgroup that holds nothing but the frozen, pinned plan (cgroup_kill.hpp)
//   verify    judge what is still alive (D state, unkillable), from reads re-checked against
//             the pidfd
//
// Every signal is audited first, one flush per step (ladder_signal.cpp). The caller's
// Interruption (EscalationOptions) stops the ladder between steps and wakes its waits:
// everything it stopped or froze is continued, and the run says which signal interrupted it.
// The engine installs no signal handler itself: a command's main thread turns SIGINT,
// SIGTERM, SIGHUP and SIGQUIT into an Interruption (InterruptGuard), a worker thread passes
// its owner's request (InterruptRequest, interrupt_guard.hpp). A swept root's signals read SIGSTOP, SIGTERM, SIGCONT, SIGSTOP,
// SIGKILL. A parent outside the plan that stopped itself when SIGSTOP stopped its child (runuser,
// su, sudo) is continued after the ladder, on every way out (ladder_parents.cpp). The engine itself refuses (outcome Refused, nothing sent) PID <= 1, gpureap and its
// ancestors, kernel threads and targets without a valid pidfd. A process of a tree that
// cannot be pinned (EMFILE...) is reported as a survivor, never left out silently.
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

// How the caller stops a ladder under way: `received` is asked between steps (a signal number,
// 0 to go on; unset: never) and `fd`, when >= 0, is polled while the ladder waits (readable
// once it should stop).
struct Interruption {
  std::function<int()> received;
  int fd = -1;
};

struct EscalationOptions {
  int first_signal = 15;  // SIGTERM
  std::chrono::milliseconds timeout{10000};
  bool escalate = true;   // SIGKILL after the timeout
  std::chrono::milliseconds kill_grace{2000};  // how long to wait after SIGKILL before judging
  std::string proc_root = "/proc";
  Interruption interruption;  // none: the ladder runs to its end
};

// A parent outside the plan that stopped itself when gpureap stopped its child (runuser, su and
// sudo mirror their child's stop; so does a shell's job control), continued after the ladder.
struct ResumedParent {
  pid_t pid = 0;
  std::string comm;  // attacker-controlled: sanitise before printing
};

struct TargetResult {
  pid_t pid = 0;
  KillOutcome outcome = KillOutcome::Survived;
  std::vector<std::string> signals;  // names sent, in order: "SIGTERM", "SIGCONT", "SIGKILL"
  std::optional<double> exit_ms;     // from the signal that ended it (first or SIGKILL) to the exit, when seen
  char final_state = '?';            // state when last seen alive ('D', 'Z', ...)
  std::string wchan;                 // for StuckInD
  bool discovered = false;           // joined during the kill (a child forked meanwhile)
  std::string detail;                // errno text, the zombie's parent, ...
  std::string cgroup_killed;         // the cgroup v2 directory killed with cgroup.kill, if any
  std::optional<ResumedParent> resumed_parent;  // its parent, stopped with it by the freeze, continued
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

// The audit of a ladder: `before` for each signal of a step, then `flush` once (the step's
// lines are on disk), then the step's signals go out, then `after` for each with its result.
// Any of them may throw: no further signal is sent, and what was stopped is continued.
struct AuditHooks {
  AuditSink before;
  AuditSink after;
  std::function<void()> flush;
};

struct EscalationRun {
  std::vector<TargetResult> results;  // as run_escalation's
  int interrupted_by = 0;  // the signal options.interruption reported during the ladder; 0: none
};

EscalationRun run_ladder(std::vector<EscalationTarget> targets, const EscalationOptions& options,
                         const AuditHooks& audit);

// Results: one per target, in the order given, then one per process discovered in a tree or
// group (discovered=true), in the order found. `audit` is called before each signal (if it
// throws, that signal is not sent and the exception propagates, after a SIGCONT to processes
// the freeze had stopped); `audit_result`, when set, after each send with result_errno filled
// in. It is run_ladder without the flush hook, returning the results alone: an interruption
// (options.interruption) still stops the ladder and continues what it stopped, but which
// signal interrupted it is not returned; a caller that must tell uses run_ladder.
std::vector<TargetResult> run_escalation(std::vector<EscalationTarget> targets, const EscalationOptions& options,
                                         const AuditSink& audit = {}, const AuditSink& audit_result = {});


}  // namespace gpureap
