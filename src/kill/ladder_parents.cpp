// Stopping never spreads: runuser, su and sudo wait for their child with WUNTRACED and stop
// themselves when it stops, and stay stopped after it is gone (their zombie child unreaped).
// The cgroup v2 freezer notifies no parent; SIGSTOP does. So before a SIGSTOP step each
// member's parent outside the plan is pinned and its state read, and after the ladder a parent
// that was running then and is stopped now gets SIGCONT through that pin.
#include <time.h>

#include <csignal>

#include "kill/ladder_state.hpp"
#include "proc/pid_files.hpp"

namespace gpureap::ladder {
namespace {

// How long a parent that is running while its child is an unreaped zombie may take to
// either reap it or stop itself (the mirror is a waitpid away).
constexpr std::chrono::milliseconds kMirrorSettle{100};

bool stopped_state(char s) { return s == 'T' || s == 't'; }

// The parent's state once it has settled: a parent still running (R) with its child exited
// and not reaped may be about to mirror the stop; look again for a short while.
std::optional<StatFields> settled_parent_state(const State& state, const WatchedParent& parent) {
  const PinnedProcess& child = state.members[parent.member];
  const auto deadline = Clock::now() + kMirrorSettle;
  for (;;) {
    auto stat = parent.ref.read_stat(state.options.proc_root);
    if (!stat || stat->state != 'R') return stat;
    if (!child.ref.has_exited() || !child.ref.not_reaped() || Clock::now() >= deadline) return stat;
    const timespec pause{0, 5'000'000};
    ::nanosleep(&pause, nullptr);
  }
}

SignalEvent resume_event(const State& state, const WatchedParent& parent) {
  SignalEvent event;
  event.pid = parent.ref.pid();
  event.start_time_ticks = parent.ref.start_time_ticks();
  event.signal = SIGCONT;
  event.reason = "parent of PID " + std::to_string(state.members[parent.member].ref.pid()) +
                 ", stopped when gpureap stopped its child";
  return event;
}

}  // namespace

void watch_parents(State& state, const std::vector<std::size_t>& members) {
  for (const std::size_t i : members) {
    const PinnedProcess& member = state.members[i];
    if (!member.live || member.stopped_by_us) continue;
    const auto stat = member.ref.read_stat(state.options.proc_root);
    if (!stat) continue;
    const pid_t ppid = stat->ppid;
    if (ppid <= 1 || state.known.count(ppid) != 0 || state.excluded.count(ppid) != 0) continue;
    if (state.watched_parents.count(ppid) != 0) continue;
    const auto parent_stat = procfs::read_stat(state.options.proc_root, ppid);
    if (!parent_stat) continue;
    PinResult pin = PidRef::pin(ppid, parent_stat->start_time_ticks, state.options.proc_root);
    if (pin.status != PinStatus::Ok) continue;
    // Pinned the member's parent only if the member still names it (a dead parent's PID may
    // have gone to a stranger between the two reads).
    const auto again = member.ref.read_stat(state.options.proc_root);
    const auto parent_now = pin.ref.read_stat(state.options.proc_root);
    if (!again || again->ppid != ppid || !parent_now) continue;
    state.watched_parents.insert(ppid);
    state.parents.push_back(WatchedParent{std::move(pin.ref), i, stopped_state(parent_now->state)});
  }
}

void resume_parents(State& state) noexcept {
  for (WatchedParent& parent : state.parents) {
    if (parent.was_stopped || state.known.count(parent.ref.pid()) != 0) continue;
    const auto stat = settled_parent_state(state, parent);
    if (!stat || !stopped_state(stat->state)) continue;
    SignalEvent event = resume_event(state, parent);
    try {
      if (state.audit.before) state.audit.before(event);
      if (state.audit.flush) state.audit.flush();
    } catch (...) {  // the log failed: undo our own act all the same
    }
    event.result_errno = parent.ref.send_signal(SIGCONT);
    try {
      if (state.audit.after) state.audit.after(event);
    } catch (...) {
    }
    if (event.result_errno == 0) {
      state.results[state.members[parent.member].result].resumed_parent = ResumedParent{parent.ref.pid(), stat->comm};
    }
  }
}

}  // namespace gpureap::ladder
