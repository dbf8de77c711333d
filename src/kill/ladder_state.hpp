// The explicit state the ladder's steps share (escalation.cpp, ladder_signal.cpp,
// ladder_freeze.cpp): the members pinned so far, their results, and the cgroups frozen.
// Internal to src/kill.
#pragma once

#include <chrono>
#include <optional>
#include <unordered_set>
#include <vector>

#include "kill/cgroup_kill.hpp"
#include "kill/escalation.hpp"
#include "kill/pid_ref.hpp"

namespace gpureap::ladder {

using Clock = std::chrono::steady_clock;

// A pinned process the ladder acts on: a target, or one found in a target's tree or group.
struct PinnedProcess {
  PidRef ref;
  std::size_t result = 0;  // index into State::results
  std::size_t target = 0;  // the target it belongs to (audit reason, sweep, cgroup)
  bool live = true;        // still to be watched (not exited, not given up on)
  bool stopped_by_us = false;
  bool was_stopped = false;  // in state T before we began: gets SIGCONT after the first signal
  // When the last signal that can end it (the first signal, SIGKILL) was sent: a kill time is
  // measured from the signal that ended the process, not from a SIGTERM it ignored.
  std::chrono::steady_clock::time_point ending_signal_at{};
};

// Milliseconds from the signal that ended `member` (or, before any, from the first signal) to `now`.
inline double ms_since_ending_signal(const PinnedProcess& member, std::chrono::steady_clock::time_point first_signal_at,
                                     std::chrono::steady_clock::time_point now) {
  const auto from = member.ending_signal_at != std::chrono::steady_clock::time_point{} ? member.ending_signal_at
                                                                                        : first_signal_at;
  return std::chrono::duration<double, std::milli>(now - from).count();
}

// The parent (outside the plan) of a member about to get SIGSTOP, pinned before the stop: a
// parent that mirrors its child's stop (runuser, su, sudo) is continued after the ladder.
struct WatchedParent {
  PidRef ref;
  std::size_t member = 0;     // the member it is the parent of
  bool was_stopped = false;   // in state T before gpureap stopped the child: left as it is
};

// Thrown at a step boundary when the caller's Interruption says stop.
struct Interrupted {
  int signal = 0;
};

struct State {
  State(std::vector<EscalationTarget>& targets_in, const EscalationOptions& options_in, const AuditHooks& audit_in)
      : targets(targets_in), options(options_in), audit(audit_in) {}

  std::vector<EscalationTarget>& targets;
  const EscalationOptions& options;
  const AuditHooks& audit;

  std::vector<TargetResult> results;  // one per target, then one per discovered process
  std::vector<PinnedProcess> members;
  std::unordered_set<pid_t> known;     // every PID handled (pinned, refused or failed)
  std::unordered_set<pid_t> excluded;  // gpureap and its ancestors
  std::vector<WatchedParent> parents;  // of members stopped with SIGSTOP (not the cgroup freezer)
  std::unordered_set<pid_t> watched_parents;
  std::vector<std::optional<cgroupfs::CgroupDir>> cgroups;  // per target: its frozen own cgroup
  // Per target: the earlier target whose frozen cgroup holds this target's tree too (several
  // targets of one job in one cgroup: `gpureap run` ends every member of its job at once).
  std::vector<std::optional<std::size_t>> frozen_with;
  std::size_t pin_budget = 0;  // pidfds the sweep may still open (tree_sweep pidfd_budget)
  Clock::time_point first_signal_at{};
  int interrupted_by = 0;  // the signal that stopped the ladder, 0 while none did

  bool sweeps(std::size_t target) const {
    return targets[target].sweep_descendants || targets[target].process_group.has_value();
  }
  // The frozen cgroup target's tree is in: its own, or the one an earlier target froze.
  const cgroupfs::CgroupDir* frozen_cgroup(std::size_t target) const {
    const std::size_t owner = frozen_with[target].value_or(target);
    return cgroups[owner].has_value() && cgroups[owner]->frozen_by_us() ? &*cgroups[owner] : nullptr;
  }
  bool cgroup_frozen(std::size_t target) const { return frozen_cgroup(target) != nullptr; }
  // Target froze a cgroup of its own (the one cgroup.kill may be written to).
  bool owns_frozen_cgroup(std::size_t target) const {
    return cgroups[target].has_value() && cgroups[target]->frozen_by_us();
  }
  int interruption_received() const {
    return options.interruption.received ? options.interruption.received() : 0;
  }
  // Throws Interrupted when the caller asked to stop: called between steps, never inside one.
  void checkpoint() const {
    if (const int sig = interruption_received(); sig != 0) throw Interrupted{sig};
  }
};

// --- ladder_signal.cpp ---
enum class Phase { BeforeFirstSignal, AfterFirstSignal };
// One audited step: `before` for each signal, one flush, then the signals, then `after`.
// Returns each send's errno (0: delivered), in order; records signals and errors in results.
std::vector<int> signal_step(State& state, const std::vector<std::size_t>& members, int sig, Phase phase);
// SIGSTOP to these members (live ones); marks those stopped.
void stop_members(State& state, const std::vector<std::size_t>& members, Phase phase);
// On every way out that is not the ladder's end: SIGCONT to what we stopped, thaw what we
// froze. Sent even when the audit fails (it undoes our own act; a job left in T is worse).
void resume_everything(State& state) noexcept;

// --- ladder_parents.cpp ---
// Before a SIGSTOP step: pin and record the state of each member's parent not in the plan.
void watch_parents(State& state, const std::vector<std::size_t>& members);
// After the ladder, on every way out: SIGCONT to each watched parent that was not stopped
// before and is stopped now (it mirrored its child's stop), audited like any signal.
void resume_parents(State& state) noexcept;

// --- ladder_freeze.cpp ---
// Freeze every swept tree and group: cgroup.freeze where the tree owns its cgroup, SIGSTOP
// otherwise, sweeping until nothing new appears.
void freeze(State& state);
// Before SIGKILL: freeze again what ran since the first signal, and sweep once more.
void refreeze(State& state);
// After the final freeze: does target's frozen cgroup hold only live, pidfd-verified members
// of the plan (any target's)? Unreadable means no.
bool cgroup_within_plan(State& state, std::size_t target);
// Thaws every cgroup the ladder froze.
void thaw_all(State& state) noexcept;

}  // namespace gpureap::ladder
