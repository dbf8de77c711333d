// Sending a step's signals: audited as one batch (one flush per step, not per signal, so a
// slow disk does not stretch the time a tree stays stopped), then sent through the pidfds.
#include <csignal>
#include <cstring>
#include <string>

#include "kill/ladder_state.hpp"
#include "accounts/user_names.hpp"
#include "text/signal_names.hpp"

namespace gpureap::ladder {
namespace {

SignalEvent event_for(const State& state, const PinnedProcess& member, int sig) {
  SignalEvent event;
  event.pid = member.ref.pid();
  event.start_time_ticks = member.ref.start_time_ticks();
  event.signal = sig;
  event.reason = state.targets[member.target].reason;
  return event;
}

std::string permission_detail(const State& state, const PinnedProcess& member) {
  const auto status = member.ref.read_status(state.options.proc_root);
  if (!status) return "permission denied: run as root or as the process's owner";
  const uid_t uid = status->effective_uid;
  const std::string user = UserNames().name(uid);
  std::string text = "owned by " + user + " (uid " + std::to_string(uid) + "): run as root";
  if (uid != 0) text += " or as " + user;
  return text;
}

// What a failed send means for the member, the same at every step.
void record_error(State& state, PinnedProcess& member, int sig, int error, Phase phase) {
  TargetResult& result = state.results[member.result];
  if (error == EPERM) {
    member.live = false;
    result.outcome = KillOutcome::PermissionDenied;
    result.detail = permission_detail(state, member);
  } else if (error == ESRCH && phase == Phase::BeforeFirstSignal) {
    member.live = false;
    result.outcome = KillOutcome::AlreadyGone;
    result.detail = "had exited before any signal";
  } else if (error != 0 && error != ESRCH) {
    member.live = false;
    result.outcome = KillOutcome::Survived;
    result.detail = "pidfd_send_signal(" + signal_name(sig) + "): " + std::strerror(error);
  }
}

}  // namespace

std::vector<int> signal_step(State& state, const std::vector<std::size_t>& members, int sig, Phase phase) {
  if (members.empty()) return {};
  state.checkpoint();
  if (sig == SIGSTOP) watch_parents(state, members);
  std::vector<SignalEvent> events;
  events.reserve(members.size());
  for (const std::size_t i : members) {
    events.push_back(event_for(state, state.members[i], sig));
    if (state.audit.before) state.audit.before(events.back());  // a failing log stops us here
  }
  if (state.audit.flush) state.audit.flush();
  std::vector<int> errors;
  errors.reserve(members.size());
  for (const std::size_t i : members) {
    PinnedProcess& member = state.members[i];
    const int error = member.ref.send_signal(sig);
    if (error == 0) state.results[member.result].signals.push_back(signal_name(sig));
    if (error == 0 && sig != SIGSTOP && sig != SIGCONT) member.ending_signal_at = Clock::now();
    record_error(state, member, sig, error, phase);
    errors.push_back(error);
  }
  for (std::size_t k = 0; k < events.size(); ++k) {
    events[k].result_errno = errors[k];
    if (state.audit.after) state.audit.after(events[k]);
  }
  return errors;
}

void stop_members(State& state, const std::vector<std::size_t>& members, Phase phase) {
  std::vector<std::size_t> live;
  for (const std::size_t i : members) {
    if (state.members[i].live) live.push_back(i);
  }
  const std::vector<int> errors = signal_step(state, live, SIGSTOP, phase);
  for (std::size_t k = 0; k < live.size(); ++k) {
    if (errors[k] == 0) state.members[live[k]].stopped_by_us = true;
  }
}

void resume_everything(State& state) noexcept {
  std::vector<std::size_t> stopped;
  std::vector<SignalEvent> events;
  for (std::size_t i = 0; i < state.members.size(); ++i) {
    const PinnedProcess& member = state.members[i];
    if (!member.live || !member.stopped_by_us) continue;
    stopped.push_back(i);
    events.push_back(event_for(state, member, SIGCONT));
    try {
      if (state.audit.before) state.audit.before(events.back());
    } catch (...) {  // the log failed: continue the process all the same
    }
  }
  try {
    if (!stopped.empty() && state.audit.flush) state.audit.flush();
  } catch (...) {
  }
  for (std::size_t k = 0; k < stopped.size(); ++k) {
    PinnedProcess& member = state.members[stopped[k]];
    events[k].result_errno = member.ref.send_signal(SIGCONT);
    if (events[k].result_errno == 0) {
      member.stopped_by_us = false;
      state.results[member.result].signals.push_back(signal_name(SIGCONT));
    }
    try {
      if (state.audit.after) state.audit.after(events[k]);
    } catch (...) {
    }
  }
  thaw_all(state);
}

}  // namespace gpureap::ladder
