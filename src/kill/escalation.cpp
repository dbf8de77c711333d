// The escalation ladder, top to bottom: classify the targets, then freeze -> signal -> wait ->
// escalate -> verify over one explicit State (ladder_state.hpp). The steps that need room of
// their own live beside it: ladder_freeze.cpp (freeze, cgroups), ladder_signal.cpp (audited
// sending, resuming).
#include "kill/escalation.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "kill/ladder_state.hpp"
#include "kill/tree_sweep.hpp"
#include "proc/pid_files.hpp"
#include "text/signal_names.hpp"

namespace gpureap {
namespace {

using namespace ladder;

void refuse(TargetResult& result, std::string why) {
  result.outcome = KillOutcome::Refused;
  result.detail = std::move(why);
}

// The zombie's parent, named only while the zombie still has it (its ppid read again through
// the pinned zombie after the parent's stat): otherwise the name could be a stranger's.
std::string zombie_parent(const State& state, const PidRef& zombie, pid_t ppid) {
  const auto parent = procfs::read_stat(state.options.proc_root, ppid);
  const auto again = zombie.read_stat(state.options.proc_root);
  const bool same = parent && again && again->ppid == ppid;
  return std::to_string(ppid) + " (" + (same ? parent->comm : std::string("?")) + ")";
}

// Step 0: what the engine refuses, what is already over, and the members to act on.
void classify(State& state, std::size_t index) {
  EscalationTarget& target = state.targets[index];
  TargetResult& result = state.results[index];
  result.pid = target.ref.pid();
  if (!target.ref.valid()) {
    return refuse(result, "not pinned: gpureap signals only through a pidfd taken when it looked at the process");
  }
  const pid_t pid = target.ref.pid();
  if (pid <= 1) return refuse(result, "PID " + std::to_string(pid) + " is never signalled");
  if (state.excluded.count(pid) != 0) return refuse(result, "gpureap itself or one of its ancestors");
  const auto stat = procfs::read_stat(state.options.proc_root, pid);
  if (stat && (stat->flags & kPfKthread) != 0) return refuse(result, "kernel thread");
  if (stat && stat->start_time_ticks != target.ref.start_time_ticks()) {
    result.outcome = KillOutcome::IdentityChanged;
    result.detail = "PID " + std::to_string(pid) + " now names another process: nothing sent";
    return;
  }
  if (stat && stat->state == 'Z' && target.ref.not_reaped()) {
    result.outcome = KillOutcome::Zombie;
    result.final_state = 'Z';
    result.detail = "zombie: exited, holds no GPU memory; its parent " + zombie_parent(state, target.ref, stat->ppid) +
                    " has not reaped it";
    return;
  }
  // The pidfd, not the /proc read, says whether it has exited: a read that fails for want of
  // descriptors must not turn a live process into "already gone" (its identity was proven
  // when it was pinned).
  if ((stat && (stat->state == 'X' || stat->state == 'Z')) || target.ref.has_exited()) {
    result.outcome = KillOutcome::AlreadyGone;
    result.detail = "had exited before any signal";
    return;
  }
  if (stat) result.final_state = stat->state;
  PinnedProcess member;
  member.ref = std::move(target.ref);
  member.result = index;
  member.target = index;
  member.was_stopped = stat && (stat->state == 'T' || stat->state == 't');
  state.known.insert(pid);
  state.members.push_back(std::move(member));
}

std::vector<std::size_t> live_members(const State& state) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < state.members.size(); ++i) {
    if (state.members[i].live) out.push_back(i);
  }
  return out;
}

// Step 2: the first signal to everyone, then let them run to handle it.
void signal_first(State& state) {
  state.first_signal_at = Clock::now();
  signal_step(state, live_members(state), state.options.first_signal, Phase::BeforeFirstSignal);
  if (state.options.first_signal == SIGKILL) return;
  std::vector<std::size_t> to_continue;
  for (const std::size_t i : live_members(state)) {
    if (state.members[i].stopped_by_us || state.members[i].was_stopped) to_continue.push_back(i);
  }
  // Group leaders last: a leader that exits while a member of its group is still stopped
  // makes the group orphaned, and the kernel then sends SIGHUP to all of it, including a
  // process it forked on its way out (the next job step).
  std::stable_partition(to_continue.begin(), to_continue.end(), [&](std::size_t i) {
    const auto stat = procfs::read_stat(state.options.proc_root, state.members[i].ref.pid());
    return !stat || stat->pgid != stat->pid;
  });
  signal_step(state, to_continue, SIGCONT, Phase::AfterFirstSignal);
  for (const std::size_t i : to_continue) state.members[i].stopped_by_us = false;
  thaw_all(state);
}

// Steps 3 and 4b: wait on every live member's pidfd until all have exited or the deadline
// passes; a signal to gpureap wakes the wait.
void wait_for_exits(State& state, Clock::duration budget, KillOutcome outcome) {
  const auto deadline = Clock::now() + budget;
  std::vector<pollfd> fds;
  std::vector<std::size_t> owners;
  for (;;) {
    state.checkpoint();
    fds.clear();
    owners.clear();
    for (const std::size_t i : live_members(state)) {
      fds.push_back(pollfd{state.members[i].ref.fd(), POLLIN, 0});
      owners.push_back(i);
    }
    if (fds.empty()) return;
    if (state.options.interruption.fd >= 0) fds.push_back(pollfd{state.options.interruption.fd, POLLIN, 0});
    const auto left = std::max(Clock::duration::zero(), deadline - Clock::now());
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec wait{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    const int ready = ::ppoll(fds.data(), fds.size(), &wait, nullptr);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return;
    }
    const auto now = Clock::now();
    for (std::size_t k = 0; k < owners.size(); ++k) {
      if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) == 0) continue;
      PinnedProcess& member = state.members[owners[k]];
      member.live = false;
      TargetResult& result = state.results[member.result];
      result.outcome = outcome;
      result.exit_ms = ms_since_ending_signal(member, state.first_signal_at, now);
    }
    if (ready == 0 || now >= deadline) return;
  }
}

// Step 4a: cgroup.kill for a frozen cgroup that holds nothing but the plan (and still some of
// it alive), audited like a signal; SIGKILL to every live member; then thaw.
void kill_survivors(State& state) {
  for (std::size_t t = 0; t < state.targets.size(); ++t) {
    if (!state.owns_frozen_cgroup(t)) continue;
    bool any_live = false;
    for (const PinnedProcess& member : state.members) {
      const bool in_cgroup = member.target == t || state.frozen_with[member.target] == t;
      if (in_cgroup && member.live && !member.ref.has_exited()) any_live = true;
    }
    if (!any_live || !cgroup_within_plan(state, t)) continue;  // never once all have exited
    state.checkpoint();
    const cgroupfs::CgroupDir& dir = *state.cgroups[t];
    SignalEvent event;
    event.pid = state.results[t].pid;
    for (const PinnedProcess& member : state.members) {
      if (member.result == t) event.start_time_ticks = member.ref.start_time_ticks();
    }
    event.signal = SIGKILL;
    event.reason = state.targets[t].reason + " (cgroup.kill of " + dir.path() + ")";
    if (state.audit.before) state.audit.before(event);
    if (state.audit.flush) state.audit.flush();
    event.result_errno = dir.kill();
    if (state.audit.after) state.audit.after(event);
    if (event.result_errno == 0) state.results[t].cgroup_killed = dir.path();
  }
  signal_step(state, live_members(state), SIGKILL, Phase::AfterFirstSignal);
  thaw_all(state);  // the killed die frozen or not; nothing may stay frozen after us
}

// Step 5: what is still alive, read through the pidfd-checked reads.
void judge_survivors(State& state) {
  const EscalationOptions& options = state.options;
  // SIGKILL was sent: as the escalation, or as the first signal (`run` kills in its own step).
  const bool killed = options.escalate || options.first_signal == SIGKILL;
  for (PinnedProcess& member : state.members) {
    if (!member.live) continue;
    TargetResult& result = state.results[member.result];
    const auto stat = member.ref.read_stat(options.proc_root);
    if (stat) result.final_state = stat->state;
    if (state.interrupted_by != 0) {
      result.outcome = KillOutcome::Survived;
      result.detail = "gpureap was interrupted by " + signal_name(state.interrupted_by) +
                      " before it could end this process: it was continued and left running";
    } else if (killed && stat && stat->state == 'D') {
      result.outcome = KillOutcome::StuckInD;
      result.wchan = member.ref.read_wchan(options.proc_root).value_or("");
      result.detail = "uninterruptible sleep in " + (result.wchan.empty() ? std::string("?") : result.wchan) +
                      ": SIGKILL takes effect only when this kernel call returns (often NFS or a hung device)";
    } else {
      result.outcome = KillOutcome::Survived;
      result.detail = killed ? std::string("still alive after SIGKILL (state ") + result.final_state + ")"
                                       : "still alive after " + signal_name(options.first_signal) +
                                             " and the timeout; SIGKILL not sent (no escalation)";
    }
  }
}

}  // namespace

EscalationRun run_ladder(std::vector<EscalationTarget> targets, const EscalationOptions& options,
                         const AuditHooks& audit) {
  State state(targets, options, audit);
  state.excluded = sweep::self_and_ancestors(options.proc_root);
  state.pin_budget = sweep::pidfd_budget();
  state.results.resize(targets.size());
  state.cgroups.resize(targets.size());
  state.frozen_with.resize(targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) classify(state, i);
  try {
    freeze(state);                                                        // 1
    signal_first(state);                                                  // 2
    wait_for_exits(state, options.timeout, KillOutcome::ExitedAfterSignal);  // 3
    if (options.escalate) {                                               // 4
      refreeze(state);
      kill_survivors(state);
      wait_for_exits(state, options.kill_grace, KillOutcome::Killed);
    }
    if (audit.flush) audit.flush();  // the last step's "sent" lines
  } catch (const Interrupted& interruption) {
    state.interrupted_by = interruption.signal;
    resume_everything(state);
  } catch (...) {
    resume_everything(state);
    resume_parents(state);
    throw;
  }
  resume_parents(state);
  if (state.interrupted_by == 0) state.interrupted_by = state.interruption_received();  // at the very end
  judge_survivors(state);                                                 // 5
  return EscalationRun{std::move(state.results), state.interrupted_by};
}

std::vector<TargetResult> run_escalation(std::vector<EscalationTarget> targets, const EscalationOptions& options,
                                         const AuditSink& audit, const AuditSink& audit_result) {
  const AuditHooks hooks{audit, audit_result, {}};
  return run_ladder(std::move(targets), options, hooks).results;
}

}  // namespace gpureap
