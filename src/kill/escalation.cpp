// The escalation ladder: classify, freeze trees and groups (SIGSTOP sweep until no new PID),
// first signal, SIGCONT, wait on the pidfds, SIGKILL, judge the survivors.
#include "kill/escalation.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>
#include <unordered_set>

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include "kill/cgroup_kill.hpp"
#include "kill/proc_peek.hpp"
#include "kill/tree_sweep.hpp"
#include "proc/user_names.hpp"

namespace gpureap {
namespace {

using Clock = std::chrono::steady_clock;

// Longest we keep re-sweeping a tree while some member has not yet reached the stopped state.
constexpr std::chrono::milliseconds kFreezeSettle{500};

struct Member {
  PidRef ref;
  std::size_t result = 0;  // index into the results
  std::size_t target = 0;  // the target it belongs to (for the audit reason and the sweep)
  bool live = true;        // still to be watched (not exited, not given up on)
  bool stopped_by_us = false;
  bool was_stopped = false;  // in state T before we began: gets SIGCONT after the first signal
};

class Ladder {
 public:
  Ladder(std::vector<EscalationTarget>& targets, const EscalationOptions& options,
         const AuditSink& audit, const AuditSink& audit_result)
      : targets_(targets), options_(options), audit_(audit), audit_result_(audit_result) {}

  std::vector<TargetResult> run() {
    excluded_ = killtree::self_and_ancestors(options_.proc_root);
    results_.resize(targets_.size());
    for (std::size_t i = 0; i < targets_.size(); ++i) classify(i);
    try {
      freeze();
      find_own_cgroups();
      first_signal();
      wait_for_exits(Clock::now() + options_.timeout, KillOutcome::ExitedAfterSignal);
      if (options_.escalate) {
        refreeze();  // the trees ran again after SIGCONT: catch what they forked meanwhile
        kill_survivors();
        wait_for_exits(Clock::now() + options_.kill_grace, KillOutcome::Killed);
      }
    } catch (...) {
      resume_after_failure();
      throw;
    }
    judge_survivors();
    return std::move(results_);
  }

 private:
  void classify(std::size_t index) {
    EscalationTarget& target = targets_[index];
    TargetResult& result = results_[index];
    result.pid = target.ref.pid();
    if (!target.ref.valid()) {
      refuse(result, "not pinned: gpureap signals only through a pidfd taken when it looked at the process");
      return;
    }
    const pid_t pid = target.ref.pid();
    if (pid <= 1) return refuse(result, "PID " + std::to_string(pid) + " is never signalled");
    if (excluded_.count(pid) != 0) return refuse(result, "gpureap itself or one of its ancestors");
    const auto stat = killproc::read_stat(options_.proc_root, pid);
    if (stat && (stat->flags & killproc::kPfKthread) != 0) return refuse(result, "kernel thread");
    if (stat && stat->start_time_ticks != target.ref.start_time_ticks()) {
      result.outcome = KillOutcome::IdentityChanged;
      result.detail = "PID " + std::to_string(pid) + " now names another process: nothing sent";
      return;
    }
    if (stat && stat->state == 'Z') {
      result.outcome = KillOutcome::Zombie;
      result.final_state = 'Z';
      const auto parent = killproc::read_stat(options_.proc_root, stat->ppid);
      result.detail = "zombie: exited, holds no GPU memory; its parent " + std::to_string(stat->ppid) + " (" +
                      (parent ? parent->comm : std::string("?")) + ") has not reaped it";
      return;
    }
    if (!stat || stat->state == 'X' || target.ref.has_exited()) {
      result.outcome = KillOutcome::AlreadyGone;
      result.detail = "had exited before any signal";
      return;
    }
    result.final_state = stat->state;
    Member member;
    member.ref = std::move(target.ref);
    member.result = index;
    member.target = index;
    member.was_stopped = stat->state == 'T' || stat->state == 't';
    known_.insert(pid);
    members_.push_back(std::move(member));
  }

  static void refuse(TargetResult& result, std::string why) {
    result.outcome = KillOutcome::Refused;
    result.detail = std::move(why);
  }

  // Audits, then sends through the pidfd. Handles the errors every step shares.
  int send(Member& member, int sig, bool before_first_signal) {
    SignalEvent event;
    event.pid = member.ref.pid();
    event.start_time_ticks = member.ref.start_time_ticks();
    event.signal = sig;
    event.reason = targets_[member.target].reason;
    if (audit_) audit_(event);  // a failing audit log stops us before the signal goes out
    const int error = member.ref.send_signal(sig);
    TargetResult& result = results_[member.result];
    if (error == 0) result.signals.push_back(signal_name(sig));
    if (audit_result_) {
      event.result_errno = error;
      audit_result_(event);
    }
    if (error == EPERM) {
      member.live = false;
      result.outcome = KillOutcome::PermissionDenied;
      result.detail = permission_detail(member.ref.pid());
    } else if (error == ESRCH && before_first_signal) {
      member.live = false;
      result.outcome = KillOutcome::AlreadyGone;
      result.detail = "had exited before any signal";
    } else if (error != 0 && error != ESRCH) {
      member.live = false;
      result.outcome = KillOutcome::Survived;
      result.detail = "pidfd_send_signal(" + signal_name(sig) + "): " + std::strerror(error);
    }
    return error;
  }

  std::string permission_detail(pid_t pid) {
    const auto uid = killproc::read_owner_uid(options_.proc_root, pid);
    if (!uid) return "permission denied: run as root or as the process's owner";
    const std::string& user = user_names_.name(*uid);
    std::string text = "owned by " + user + " (uid " + std::to_string(*uid) + "): run as root";
    if (*uid != 0) text += " or as " + user;
    return text;
  }

  bool sweeps(std::size_t target) const {
    return targets_[target].sweep_descendants || targets_[target].process_group.has_value();
  }

  // SIGSTOP every process of every swept tree or group, sweeping again until a sweep finds
  // nothing new and every member has reached the stopped state: nobody can fork away.
  void freeze() {
    bool any = false;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (!sweeps(members_[i].target)) continue;
      any = true;
      stop(i);
    }
    if (any) sweep_until_stable();
  }

  // Before SIGKILL: the swept trees have run since the SIGCONT and may have forked again.
  // Stop them once more and sweep, so the SIGKILL reaches every member and none can fork.
  void refreeze() {
    bool any = false;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      Member& member = members_[i];
      if (!member.live || !sweeps(member.target)) continue;
      any = true;
      const int error = send(member, SIGSTOP, false);
      if (error == 0) {
        member.stopped_by_us = true;
      } else if (error == ESRCH) {  // exited since the wait ended
        member.live = false;
        TargetResult& result = results_[member.result];
        result.outcome = KillOutcome::ExitedAfterSignal;
        result.exit_ms = std::chrono::duration<double, std::milli>(Clock::now() - first_signal_at_).count();
      }
    }
    if (any) sweep_until_stable();
  }

  void sweep_until_stable() {
    const auto settle_deadline = Clock::now() + kFreezeSettle;
    for (;;) {
      std::size_t found = 0;
      for (std::size_t t = 0; t < targets_.size(); ++t) {
        if (!sweeps(t)) continue;
        killtree::SweepScope scope;
        scope.descendants = targets_[t].sweep_descendants;
        scope.process_group = targets_[t].process_group;
        for (const Member& member : members_) {
          if (member.target == t) scope.members.push_back(member.ref.pid());
        }
        found += killtree::sweep_once(options_.proc_root, scope, known_, excluded_,
                                      [&](PidRef ref, char state) { adopt(std::move(ref), state, t); });
      }
      if (found != 0) continue;
      if (all_frozen() || Clock::now() >= settle_deadline) break;
      ::sched_yield();  // a SIGSTOP sent is not yet a process stopped: look again
    }
  }

  void adopt(PidRef ref, char state, std::size_t target) {
    TargetResult result;
    result.pid = ref.pid();
    result.discovered = true;
    result.final_state = state;
    results_.push_back(std::move(result));
    Member member;
    member.ref = std::move(ref);
    member.result = results_.size() - 1;
    member.target = target;
    member.was_stopped = state == 'T' || state == 't';
    members_.push_back(std::move(member));
    stop(members_.size() - 1);
  }

  void stop(std::size_t index) {
    Member& member = members_[index];
    if (!member.live) return;
    if (send(member, SIGSTOP, true) == 0) member.stopped_by_us = true;
  }

  bool all_frozen() {
    for (Member& member : members_) {
      if (!member.live || !sweeps(member.target) || member.ref.has_exited()) continue;
      const auto stat = killproc::read_stat(options_.proc_root, member.ref.pid());
      if (!stat) continue;
      const char s = stat->state;
      if (s != 'T' && s != 't' && s != 'Z' && s != 'X' && s != 'D') return false;
    }
    return true;
  }

  void first_signal() {
    first_signal_at_ = Clock::now();
    for (Member& member : members_) {
      if (member.live) send(member, options_.first_signal, true);
    }
    for (Member& member : members_) {
      if (member.live && (member.stopped_by_us || member.was_stopped) && options_.first_signal != SIGKILL) {
        send(member, SIGCONT, false);
        member.stopped_by_us = false;
      }
    }
  }

  // Waits on every live member's pidfd until all have exited or the deadline passes.
  void wait_for_exits(Clock::time_point deadline, KillOutcome outcome) {
    std::vector<pollfd> fds;
    std::vector<std::size_t> owners;
    for (;;) {
      fds.clear();
      owners.clear();
      for (std::size_t i = 0; i < members_.size(); ++i) {
        if (!members_[i].live) continue;
        fds.push_back(pollfd{members_[i].ref.fd(), POLLIN, 0});
        owners.push_back(i);
      }
      if (fds.empty()) return;
      const auto left = std::max(Clock::duration::zero(), deadline - Clock::now());
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec wait{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
      const int ready = ::ppoll(fds.data(), fds.size(), &wait, nullptr);
      if (ready < 0) {
        if (errno == EINTR) continue;
        return;
      }
      const auto now = Clock::now();
      for (std::size_t k = 0; k < fds.size(); ++k) {
        if ((fds[k].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) == 0) continue;
        Member& member = members_[owners[k]];
        member.live = false;
        TargetResult& result = results_[member.result];
        result.outcome = outcome;
        result.exit_ms = std::chrono::duration<double, std::milli>(now - first_signal_at_).count();
      }
      if (ready == 0 || now >= deadline) return;
    }
  }

  void kill_survivors() {
    for (std::size_t t = 0; t < targets_.size(); ++t) {
      if (targets_[t].sweep_descendants) kill_own_cgroup(t);
    }
    for (Member& member : members_) {
      if (member.live) send(member, SIGKILL, false);
    }
  }

  // While the tree is frozen: is it exactly its own cgroup v2? Then, before SIGKILL,
  // cgroup.kill also takes whatever the tree forked after the last sweep, even a child
  // reparented out of the tree when its parent exited. Decided here, while nothing can fork
  // or exit, because later the cgroup rightly holds processes the sweep never saw.
  void find_own_cgroups() {
    own_cgroup_.assign(targets_.size(), std::string());
    for (std::size_t t = 0; t < targets_.size(); ++t) {
      if (!targets_[t].sweep_descendants) continue;
      std::unordered_set<pid_t> tree;
      pid_t live_pid = 0;
      for (const Member& member : members_) {
        if (member.target != t) continue;
        tree.insert(member.ref.pid());
        if (member.live && live_pid == 0) live_pid = member.ref.pid();
      }
      if (live_pid == 0) continue;
      const auto dir = killtree::own_cgroup_dir(options_.proc_root, live_pid);
      const auto root = killproc::read_stat(options_.proc_root, results_[t].pid);
      // Our own process group is never "the job": it holds gpureap's pipeline neighbours.
      const pid_t job_pgid = root && root->pgid != ::getpgrp() ? root->pgid : 0;
      if (dir && killtree::cgroup_is_exactly(options_.proc_root, *dir, tree, job_pgid, excluded_)) {
        own_cgroup_[t] = *dir;
      }
    }
  }

  void kill_own_cgroup(std::size_t target) {
    if (target >= own_cgroup_.size() || own_cgroup_[target].empty()) return;
    const std::string& dir = own_cgroup_[target];
    const Member* root = nullptr;
    for (const Member& member : members_) {
      if (member.target == target && member.result == target) root = &member;
    }
    SignalEvent event;
    event.pid = results_[target].pid;
    event.start_time_ticks = root != nullptr ? root->ref.start_time_ticks() : 0;
    event.signal = SIGKILL;
    event.reason = targets_[target].reason + " (cgroup.kill of " + dir + ")";
    if (audit_) audit_(event);
    event.result_errno = killtree::write_cgroup_kill(dir);
    if (audit_result_) audit_result_(event);
    if (event.result_errno == 0) results_[target].cgroup_killed = dir;
  }

  void judge_survivors() {
    for (Member& member : members_) {
      if (!member.live) continue;
      TargetResult& result = results_[member.result];
      const auto stat = killproc::read_stat(options_.proc_root, member.ref.pid());
      if (stat) result.final_state = stat->state;
      if (options_.escalate && stat && stat->state == 'D') {
        result.outcome = KillOutcome::StuckInD;
        result.wchan = killproc::read_wchan(options_.proc_root, member.ref.pid());
        result.detail = "uninterruptible sleep in " + (result.wchan.empty() ? std::string("?") : result.wchan) +
                        ": SIGKILL takes effect only when this kernel call returns (often NFS or a hung device)";
      } else {
        result.outcome = KillOutcome::Survived;
        result.detail = options_.escalate
                            ? std::string("still alive after SIGKILL (state ") + result.final_state + ")"
                            : "still alive after " + signal_name(options_.first_signal) +
                                  " and the timeout; SIGKILL not sent (no escalation)";
      }
    }
  }

  // The audit sink failed mid-ladder: let processes we stopped run again, best effort (each
  // SIGCONT is still audited first; one that cannot be audited is not sent).
  void resume_after_failure() noexcept {
    for (Member& member : members_) {
      if (!member.live || !member.stopped_by_us) continue;
      try {
        send(member, SIGCONT, false);
      } catch (...) {
      }
    }
  }

  std::vector<EscalationTarget>& targets_;
  const EscalationOptions& options_;
  const AuditSink& audit_;
  const AuditSink& audit_result_;
  std::vector<TargetResult> results_;
  std::vector<Member> members_;
  std::unordered_set<pid_t> known_;
  std::unordered_set<pid_t> excluded_;
  UserNames user_names_;
  Clock::time_point first_signal_at_{};
  std::vector<std::string> own_cgroup_;  // per target: its own cgroup v2 directory, or ""
};

}  // namespace

std::vector<TargetResult> run_escalation(std::vector<EscalationTarget> targets, const EscalationOptions& options,
                                         const AuditSink& audit, const AuditSink& audit_result) {
  return Ladder(targets, options, audit, audit_result).run();
}

}  // namespace gpureap
