// The freeze: nothing in a swept tree or group may fork or run while it is being signalled.
// A tree that owns its cgroup v2 is frozen whole with cgroup.freeze (atomic); anything else
// gets SIGSTOP, member by member, with sweeps until no new PID appears.
#include <sched.h>

#include <cstring>
#include <string>

#include "kill/ladder_state.hpp"
#include "kill/tree_sweep.hpp"
#include "proc/pid_files.hpp"

namespace gpureap::ladder {
namespace {

// Longest we keep re-sweeping a tree while some member has not yet reached the stopped state.
constexpr std::chrono::milliseconds kFreezeSettle{500};
// Longest we wait for cgroup.events to say "frozen 1" before falling back to SIGSTOP.
constexpr std::chrono::milliseconds kCgroupFreezeBound{1000};

std::vector<std::size_t> live_members_to_stop(const State& state, bool only_target, std::size_t target) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < state.members.size(); ++i) {
    const PinnedProcess& member = state.members[i];
    if (!member.live || member.stopped_by_us || !state.sweeps(member.target)) continue;
    if (only_target && member.target != target) continue;
    if (state.cgroup_frozen(member.target)) continue;
    out.push_back(i);
  }
  return out;
}

std::size_t adopt(State& state, PidRef ref, char st, std::size_t target) {
  TargetResult result;
  result.pid = ref.pid();
  result.discovered = true;
  result.final_state = st;
  state.results.push_back(std::move(result));
  PinnedProcess member;
  member.ref = std::move(ref);
  member.result = state.results.size() - 1;
  member.target = target;
  member.was_stopped = st == 'T' || st == 't';
  state.members.push_back(std::move(member));
  return state.members.size() - 1;
}

// A process of the tree that we cannot hold: it will not be signalled, and the kill fails.
void report_unpinned(State& state, pid_t pid, const PinResult& failure) {
  TargetResult result;
  result.pid = pid;
  result.discovered = true;
  result.outcome = KillOutcome::Survived;
  const bool no_fds = failure.error == EMFILE || failure.error == ENFILE;
  result.detail = std::string("joined the tree during the kill but could not be pinned (") +
                  (failure.status == PinStatus::Unsupported ? "no pidfd_open" : std::strerror(failure.error)) +
                  "): not signalled, it may still run" +
                  (no_fds ? "; raise the open-file limit (ulimit -n) and run gpureap again" : "");
  state.results.push_back(std::move(result));
}

bool all_frozen(const State& state) {
  for (const PinnedProcess& member : state.members) {
    if (!member.live || !state.sweeps(member.target) || state.cgroup_frozen(member.target)) continue;
    if (member.ref.has_exited()) continue;
    const auto stat = procfs::read_stat(state.options.proc_root, member.ref.pid());
    if (!stat) continue;
    const char s = stat->state;
    if (s != 'T' && s != 't' && s != 'Z' && s != 'X' && s != 'D') return false;
  }
  return true;
}

// Sweeps every swept target until a sweep finds nothing new and every member is stopped.
// Each sweep's finds are stopped as one audited step.
void sweep_until_stable(State& state) {
  const auto settle_deadline = Clock::now() + kFreezeSettle;
  for (;;) {
    state.checkpoint();
    std::vector<std::size_t> found;
    for (std::size_t t = 0; t < state.targets.size(); ++t) {
      if (!state.sweeps(t)) continue;
      sweep::SweepScope scope;
      scope.descendants = state.targets[t].sweep_descendants;
      scope.process_group = state.targets[t].process_group;
      for (const PinnedProcess& member : state.members) {
        if (member.target == t && member.live) scope.members.push_back(&member.ref);
      }
      // Adopted after the walk: adopting grows state.members, which the scope points into.
      std::vector<std::pair<PidRef, char>> finds;
      std::vector<std::pair<pid_t, PinResult>> failures;
      sweep::sweep_once(
          state.options.proc_root, scope, state.known, state.excluded, state.pin_budget,
          [&](PidRef ref, char st) { finds.emplace_back(std::move(ref), st); },
          [&](pid_t pid, const PinResult& failure) {
            failures.emplace_back(pid, PinResult{failure.status, failure.error, {}});
          });
      for (auto& [ref, st] : finds) found.push_back(adopt(state, std::move(ref), st, t));
      for (const auto& [pid, failure] : failures) report_unpinned(state, pid, failure);
    }
    std::vector<std::size_t> to_stop;
    for (const std::size_t i : found) {
      if (!state.cgroup_frozen(state.members[i].target)) to_stop.push_back(i);
    }
    stop_members(state, to_stop, Phase::BeforeFirstSignal);
    if (!found.empty()) continue;
    if (all_frozen(state) || Clock::now() >= settle_deadline) break;
    ::sched_yield();  // a SIGSTOP sent is not yet a process stopped: look again
  }
}

// Is pid one of the plan's processes right now: a member, below a member, or (group mode) in
// target's selected process group? A read-only look that only decides whether to try the freeze.
bool belongs_now(const State& state, std::size_t target, pid_t pid, const std::unordered_set<pid_t>& tree) {
  const auto& group = state.targets[target].process_group;
  for (int depth = 0; depth < 4096 && pid > 1; ++depth) {
    if (state.excluded.count(pid) != 0) return false;
    if (tree.count(pid) != 0) return true;
    const auto stat = procfs::read_stat(state.options.proc_root, pid);
    if (!stat) return false;
    if (group && stat->pgid == *group) return true;
    pid = stat->ppid;
  }
  return false;
}

// Freezes target's own cgroup when everything in it belongs to the plan's trees (or the
// selected group). The decision that matters comes later (cgroup_within_plan, after the freeze).
void freeze_own_cgroup(State& state, std::size_t target) {
  state.cgroups[target].reset();
  state.frozen_with[target].reset();
  std::unordered_set<pid_t> plan;
  pid_t any_live = 0;
  for (const PinnedProcess& member : state.members) {
    if (!member.live) continue;
    plan.insert(member.ref.pid());
    if (member.target == target && any_live == 0) any_live = member.ref.pid();
  }
  if (any_live == 0) return;
  const auto path = cgroupfs::own_cgroup_dir(state.options.proc_root, any_live);
  if (!path) return;
  for (std::size_t t = 0; t < target; ++t) {
    if (state.owns_frozen_cgroup(t) && state.cgroups[t]->path() == *path) {
      state.frozen_with[target] = t;  // frozen for an earlier target: every PID in it was checked then
      return;
    }
  }
  auto dir = cgroupfs::CgroupDir::open(*path);
  if (!dir) return;
  const auto pids = dir->member_pids();
  if (!pids || pids->empty()) return;
  for (const pid_t pid : *pids) {
    if (!belongs_now(state, target, pid, plan)) return;
  }
  if (dir->freeze(kCgroupFreezeBound)) state.cgroups[target] = std::move(dir);
}

// After the sweep: a cgroup frozen on the first look that holds anything else than the plan
// is thawed, and its tree is stopped with SIGSTOP instead.
bool drop_foreign_cgroups(State& state, Phase phase) {
  bool dropped = false;
  for (std::size_t t = 0; t < state.targets.size(); ++t) {
    if (!state.owns_frozen_cgroup(t) || cgroup_within_plan(state, t)) continue;
    state.cgroups[t].reset();  // thaws
    stop_members(state, live_members_to_stop(state, true, t), phase);
    for (std::size_t sharer = t + 1; sharer < state.targets.size(); ++sharer) {
      if (state.frozen_with[sharer] != t) continue;
      state.frozen_with[sharer].reset();
      stop_members(state, live_members_to_stop(state, true, sharer), phase);
    }
    dropped = true;
  }
  return dropped;
}

}  // namespace

bool cgroup_within_plan(State& state, std::size_t target) {
  const cgroupfs::CgroupDir* cgroup = state.frozen_cgroup(target);
  if (cgroup == nullptr) return false;
  const auto pids = cgroup->member_pids();
  if (!pids || pids->empty()) return false;
  for (const pid_t pid : *pids) {
    bool member_of_plan = false;
    for (const PinnedProcess& member : state.members) {
      if (member.ref.pid() != pid || !member.live) continue;
      // Read again and checked against the pidfd: unreadable or reused means no.
      member_of_plan = member.ref.read_stat(state.options.proc_root).has_value();
      break;
    }
    if (!member_of_plan) return false;
  }
  return true;
}

void thaw_all(State& state) noexcept {
  for (auto& cgroup : state.cgroups) {
    if (cgroup) cgroup->thaw();
  }
}

// Freezes the cgroups of the swept trees that own one; false when no target is swept at all.
bool freeze_swept_cgroups(State& state) {
  bool any = false;
  for (std::size_t t = 0; t < state.targets.size(); ++t) {
    if (!state.sweeps(t)) continue;
    any = true;
    state.checkpoint();
    if (state.targets[t].sweep_descendants) freeze_own_cgroup(state, t);
  }
  return any;
}

void freeze(State& state) {
  if (!freeze_swept_cgroups(state)) return;
  stop_members(state, live_members_to_stop(state, false, 0), Phase::BeforeFirstSignal);
  sweep_until_stable(state);
  if (drop_foreign_cgroups(state, Phase::BeforeFirstSignal)) sweep_until_stable(state);
}

// True while some member's pidfd has not signalled exit.
bool any_member_lives(const State& state) {
  for (const PinnedProcess& member : state.members) {
    if (member.live && !member.ref.has_exited()) return true;
  }
  return false;
}

void refreeze(State& state) {
  // With every member gone there is nothing to hold still, and any PID read now may be a
  // stranger's.
  if (!any_member_lives(state)) return;
  if (!freeze_swept_cgroups(state)) return;
  const std::vector<std::size_t> stop = live_members_to_stop(state, false, 0);
  std::vector<std::size_t> live;
  for (const std::size_t i : stop) {
    if (state.members[i].live) live.push_back(i);
  }
  const std::vector<int> errors = signal_step(state, live, SIGSTOP, Phase::AfterFirstSignal);
  for (std::size_t k = 0; k < live.size(); ++k) {
    PinnedProcess& member = state.members[live[k]];
    if (errors[k] == 0) {
      member.stopped_by_us = true;
    } else if (errors[k] == ESRCH) {  // exited since the wait ended
      member.live = false;
      TargetResult& result = state.results[member.result];
      result.outcome = KillOutcome::ExitedAfterSignal;
      result.exit_ms = ms_since_ending_signal(member, state.first_signal_at, Clock::now());
    }
  }
  sweep_until_stable(state);
  if (drop_foreign_cgroups(state, Phase::AfterFirstSignal)) sweep_until_stable(state);
}

}  // namespace gpureap::ladder
