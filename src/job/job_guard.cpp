#include "job/job_guard.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "holders/holder_tracker.hpp"
#include "holders/process_events.hpp"
#include "job/job_cgroup.hpp"
#include "job/job_ending.hpp"
#include "job/job_members.hpp"
#include "job/job_spawn.hpp"
#include "kill/tree_sweep.hpp"
#include "proc/ancestry.hpp"
#include "proc/pid_files.hpp"
#include "snapshot/holder_events.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap::job {
namespace {

using Clock = std::chrono::steady_clock;

// What tini forwards that a job may act on: the terminal's and a user's signals, the job-control
// ones (SIGTSTP stops the job, SIGCONT resumes it) and SIGWINCH (a resized terminal).
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGCONT, SIGWINCH};

// How much more memory no listed process holds on a GPU the job was never seen on, before it is
// called the job's: the driver's own allocations move by a few MiB.
constexpr std::uint64_t kUnexplainedToleranceBytes = 64ull << 20;

bool abnormal(int wait_status) {
  return WIFSIGNALED(wait_status) || (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) != 0);
}

// A process of the job seen using a GPU (its device file, or the driver lists it): its name,
// for the report of a --fail-fast end.
struct GpuUser {
  std::string comm;
};

class Guard {
 public:
  Guard(const RunSettings& settings, RunReport& report) : settings_(settings), report_(report) {}

  void run() {
    setup_signals();
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    // Every GPU's memory before the job starts: a job that leaks and exits before the first
    // look is never seen on the GPU, and only this tells its memory did not come back.
    start_reading_ = driver().read_driver_only();
    if (settings_.use_cgroup) {
      std::string why;
      if (auto created = JobCgroup::create(settings_.proc_root, &why)) cgroup_.emplace(std::move(*created));
      report_.no_cgroup_reason = cgroup_ ? std::string() : why;
    } else {
      report_.no_cgroup_reason = "--no-cgroup";
    }
    report_.ownership = cgroup_ ? Ownership::Cgroup : Ownership::SubreaperTree;
    if (cgroup_) report_.cgroup_path = cgroup_->path();
    if (settings_.fail_fast) {
      std::string why;
      exit_events_ = holders::ProcessEvents::open(&why);
      report_.exit_events = exit_events_.has_value();
      if (!exit_events_) {
        report_.notes.push_back(
            "--fail-fast sees only how gpureap's own children and the orphans it reaps ended (" + why +
            "; the kernel's exit events need root in the host's PID namespace)");
      }
    }
    start_holder_events();
    take_terminal_ = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
    interactive_ = take_terminal_;
    SpawnSettings spawn;
    spawn.argv = settings_.argv;
    spawn.cgroup_dir_fd = cgroup_ ? cgroup_->dir_fd() : -1;
    spawn.cgroup_procs_fd = cgroup_ ? cgroup_->procs_fd() : -1;
    spawn.terminal_fd = take_terminal_ ? STDIN_FILENO : -1;
    spawn.original_mask = original_mask_;
    start_ = Clock::now();
    report_.spawn = spawn_job(spawn);
    report_.main_pid = report_.spawn.pid;
    if (!report_.spawn.ok()) {
      report_.end = JobEnd::SpawnFailed;
      if (report_.spawn.pid > 0) waitpid(report_.spawn.pid, nullptr, 0);
      give_back_terminal();
      drain_signals();
      return;
    }
    watch();
    report_.run_seconds = seconds_since(start_);
    give_back_terminal();
    end_what_is_left();
    drain_signals();
  }

 private:
  // Without the signalfd a signal meant for the job would be lost (or end gpureap alone), so
  // the job is not started.
  void setup_signals() {
    sigset_t mask;
    sigemptyset(&mask);
    for (int sig : kForwarded) sigaddset(&mask, sig);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, &original_mask_);
    signal_fd_ = procfs::unique_fd(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!signal_fd_) {
      const int error = errno;
      sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
      throw RunSetupError(fmt::format("cannot create the signalfd that forwards signals to the job: {}",
                                      std::strerror(error)));
    }
    // Taking the terminal back from the job's group must not stop gpureap.
    signal(SIGTTOU, SIG_IGN);
  }

  // Signals that arrived while ending the job are moot now (read_signals records them and,
  // the job being over, forwards nothing). They stay blocked until gpureap exits: unblocked
  // before the report is written, one would end gpureap with 128+signal and no report.
  void drain_signals() {
    ending_ = true;
    read_signals();
  }

  void give_back_terminal() {
    if (take_terminal_) {
      tcsetpgrp(STDIN_FILENO, getpgrp());
      take_terminal_ = false;
    }
  }

  // The job stopped on the terminal's Ctrl-Z (or SIGTTIN/SIGTTOU): gpureap stops with it, as a
  // shell's job does, so that the shell it was started from gets its prompt back. When the
  // shell resumes gpureap (fg sends SIGCONT and hands it the terminal), the terminal goes back
  // to the job and the job is resumed, so Ctrl-C reaches it again.
  void stop_with_the_job(int stop_signal) {
    if (!interactive_) return;
    if (stop_signal != SIGTSTP && stop_signal != SIGTTIN && stop_signal != SIGTTOU) return;
    tcsetpgrp(STDIN_FILENO, getpgrp());
    // SIGTSTP is blocked (the signalfd forwards it): raised, then unblocked, its default action
    // stops gpureap here. In an orphaned process group the kernel discards it: nobody could
    // resume gpureap, and the job is resumed at once below.
    sigset_t tstp;
    sigemptyset(&tstp);
    sigaddset(&tstp, SIGTSTP);
    raise(SIGTSTP);
    sigprocmask(SIG_UNBLOCK, &tstp, nullptr);
    sigprocmask(SIG_BLOCK, &tstp, nullptr);
    // Resumed (by fg, or by bg without the terminal: then the job runs in the background). The
    // time it was stopped is not idleness for --hang-timeout.
    last_active_ = Clock::now();
    take_terminal_ = tcgetpgrp(STDIN_FILENO) == getpgrp();
    if (take_terminal_) tcsetpgrp(STDIN_FILENO, report_.main_pid);
    forward(SIGCONT);
  }

  static double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  }

  // Every child that has ended: the main command's status, and the orphans reparented to us.
  void reap_children() {
    if (interactive_ && !ending_ && !report_.main_wait_status) {
      int status = 0;
      if (waitpid(report_.main_pid, &status, WNOHANG | WUNTRACED) == report_.main_pid) {
        if (WIFSTOPPED(status)) {
          stop_with_the_job(WSTOPSIG(status));
        } else {
          report_.main_wait_status = status;
        }
      }
    }
    while (true) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) return;
      if (pid == report_.main_pid) {
        report_.main_wait_status = status;
        continue;
      }
      ++report_.orphans_reaped;
      note_exit(pid, status, true);
    }
  }

  void note_exit(pid_t pid, int status, bool by_wait) {
    if (!settings_.fail_fast || report_.failed || ending_) return;
    auto it = gpu_users_.find(pid);
    if (it == gpu_users_.end() || !abnormal(status)) return;
    report_.failed = FailedProcess{pid, it->second.comm, status, by_wait};
  }

  void read_signals() {
    signalfd_siginfo info{};
    while (read(signal_fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) continue;  // reap_children below looks at every child
      report_.forwarded_signals.push_back(sig);
      if (ending_) continue;
      // A stop (the runtime's, the batch system's, Ctrl-C) may end the job before the next look:
      // what it holds now is what the report verifies released, so it is looked at first, once.
      if (!looked_at_stop_ && (sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT)) {
        looked_at_stop_ = true;
        look_before_stop();
      }
      forward(sig);
    }
    reap_children();
  }

  // The stop is forwarded whatever the look meets: a look that fails is said in the report.
  void look_before_stop() {
    try {
      sample();
    } catch (const std::exception& error) {
      report_.notes.push_back(std::string("the look at the job before its stop failed: ") + error.what());
    }
  }

  // To every proven process of the job in its process group, each pinned by pidfd first: a
  // stranger who joined the group (any process of the session may) is not the job and hears
  // nothing.
  void forward(int sig) { signal_group_members(membership(), report_.main_pid, sig); }

  void read_exit_events() {
    holders::ProcessEventBatch batch;
    exit_events_->drain(batch);
    for (const auto& f : batch.forks) gpu_users_.erase(f.child);  // a PID we knew now names a new process
    for (const auto& e : batch.exits) note_exit(e.pid, e.wait_status, false);
    if (batch.lost && !events_lost_noted_) {
      events_lost_noted_ = true;
      report_.notes.push_back("the kernel dropped some exit events (a very busy host): --fail-fast may miss a crash");
    }
  }

  // The kernel's events make a process of the job that opens a GPU device file known at once
  // (a GPU user for --fail-fast, a GPU whose release is verified), not at the next look; the
  // looks stay the check. Started before the job, so that every open of the job is heard.
  void start_holder_events() {
    std::string why = holder_events_turned_off();
    if (why.empty()) {
      holders::HolderTrackerOptions options;
      options.proc_root = settings_.proc_root;
      options.dev_dir = settings_.dev_dir;
      holders_ = holders::HolderTracker::start(std::move(options), why);
    }
    report_.holder_events = holders_ != nullptr;
    if (!holders_) {
      report_.notes.push_back("the job's GPU holders were found only at its looks (every --poll-interval): " + why);
    }
  }

  // A lead, not a proof (the look proves): the process is in the job's cgroup, or below
  // gpureap (every process the job forks stays below its child subreaper).
  bool may_be_member(pid_t pid, std::uint64_t start_time_ticks) const {
    if (cgroup_) {
      const PinResult pin = PidRef::pin(pid, start_time_ticks, settings_.proc_root);
      if (pin.status == PinStatus::Ok && sweep::pinned_in_cgroup(settings_.proc_root, pin.ref, cgroup_->path())) {
        return true;
      }
    }
    const pid_t self = getpid();
    const auto chain = ancestry_walk(pid, [&](pid_t at) -> std::optional<pid_t> {
      if (at == self) return std::nullopt;
      const auto stat = procfs::read_stat(settings_.proc_root, at);
      if (!stat) return std::nullopt;
      return stat->ppid;
    });
    return chain.size() > 1 && chain.back() == self;
  }

  // Reads the holder events; a holder not looked at before that may be the job's makes a look
  // now. Each holder is looked at once (by PID and start time) while it holds.
  void read_holder_events() {
    holders_->refresh();
    std::set<std::pair<pid_t, std::uint64_t>> holding;
    bool look = false;
    for (const auto& key : holders_->holders_started()) {
      holding.insert(key);
      if (look || holders_looked_at_.count(key) > 0) continue;
      look = gpu_users_.count(key.first) == 0 && may_be_member(key.first, key.second);
    }
    holders_looked_at_ = std::move(holding);
    if (look) {
      ++report_.looks_on_events;
      sample();
    }
  }

  SnapshotSource& driver() {
    if (!source_) {
      SnapshotOptions options = default_snapshot_options();
      options.proc.proc_root = settings_.proc_root;
      source_ = std::make_unique<SnapshotSource>(options);
    }
    return *source_;
  }

  MembershipSettings membership() const {
    MembershipSettings membership;
    membership.proc_root = settings_.proc_root;
    membership.dev_dir = settings_.dev_dir;
    membership.self = getpid();
    membership.cgroup = cgroup_ ? &*cgroup_ : nullptr;
    return membership;
  }

  GpuUse& gpu_use(unsigned index) {
    for (auto& g : report_.gpus) {
      if (g.index == index) return g;
    }
    report_.gpus.push_back(GpuUse{});
    report_.gpus.back().index = index;
    return report_.gpus.back();
  }

  static void add_pid(std::vector<pid_t>& pids, pid_t pid) {
    if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
  }

  // One look at the job: its members, which of them use a GPU, the driver's view of the
  // memory they hold, and whether anything ran since the last look.
  void sample() {
    ++report_.samples;
    const Members members = list_members(membership());
    last_reading_ = driver().read_driver_only();
    bool active = false;
    std::map<std::pair<pid_t, std::uint64_t>, std::uint64_t> cpu;
    for (const auto& [pid, m] : members) {
      const auto key = std::make_pair(pid, m.stat.start_time_ticks);
      const std::uint64_t ticks = m.stat.utime_ticks + m.stat.stime_ticks;
      cpu[key] = ticks;
      auto before = last_cpu_.find(key);
      if (before == last_cpu_.end() || before->second != ticks) active = true;
      if (m.stat.state == 'R') active = true;
    }
    if (cpu.size() != last_cpu_.size()) active = true;  // a member ended or appeared
    last_cpu_ = std::move(cpu);
    last_sm_util_.clear();

    std::map<unsigned, unsigned> index_of_minor;
    if (last_reading_) {
      for (const auto& gpu : last_reading_->gpus) {
        if (gpu.minor_number) index_of_minor[*gpu.minor_number] = gpu.index;
      }
    }
    for (const auto& [pid, m] : members) {
      for (unsigned minor : m.gpu_minors) {
        auto it = index_of_minor.find(minor);
        GpuUse& use = gpu_use(it != index_of_minor.end() ? it->second : minor);
        add_pid(use.job_pids, pid);
        gpu_users_[pid] = GpuUser{m.stat.comm};
      }
    }
    if (last_reading_) {
      for (const auto& gpu : last_reading_->gpus) {
        std::uint64_t job_bytes = 0;
        bool job_on_it = false;
        for (const auto& p : gpu.processes) {
          const auto pid = static_cast<pid_t>(p.pid);
          auto member = members.find(pid);
          if (member == members.end()) continue;
          job_on_it = true;
          job_bytes += p.used_memory.value_or(0);
          gpu_users_[pid] = GpuUser{member->second.stat.comm};
          if (p.sm_util_percent) {
            last_sm_util_[pid] = *p.sm_util_percent;
            if (*p.sm_util_percent > 0) active = true;
          }
        }
        if (!job_on_it && !has_gpu(gpu.index)) continue;
        GpuUse& use = gpu_use(gpu.index);
        if (!use.used_first_bytes) use.used_first_bytes = gpu.memory.used;
        use.job_last_bytes = job_bytes;
        use.job_peak_bytes = std::max(use.job_peak_bytes, job_bytes);
        for (const auto& p : gpu.processes) {
          if (members.count(static_cast<pid_t>(p.pid))) add_pid(use.job_pids, static_cast<pid_t>(p.pid));
        }
      }
    }
    const auto now = Clock::now();
    if (active || report_.samples == 1) last_active_ = now;
  }

  bool has_gpu(unsigned index) const {
    return std::any_of(report_.gpus.begin(), report_.gpus.end(), [index](const GpuUse& g) { return g.index == index; });
  }

  bool hung() const {
    if (!settings_.hang_timeout || report_.samples < 2) return false;
    return Clock::now() - last_active_ >= *settings_.hang_timeout;
  }

  void watch() {
    // The first look is a little after the start: a job that ends at once never loads the driver.
    auto next_sample = start_ + std::min(settings_.poll_interval, std::chrono::milliseconds(100));
    while (true) {
      reap_children();
      if (report_.main_wait_status) {
        report_.end = JobEnd::Exited;
        return;
      }
      if (report_.failed) {
        report_.end = JobEnd::FailFast;
        return;
      }
      const auto now = Clock::now();
      if (now >= next_sample) {
        sample();
        if (hung()) {
          report_.end = JobEnd::Hung;
          report_.idle_seconds = seconds_since(last_active_);
          return;
        }
        next_sample = now + settings_.poll_interval;
        continue;
      }
      pollfd fds[4] = {{signal_fd_.get(), POLLIN, 0},
                       {exit_events_ ? exit_events_->fd() : -1, POLLIN, 0},
                       {holders_ ? holders_->device_events_fd() : -1, POLLIN, 0},
                       {holders_ ? holders_->process_events_fd() : -1, POLLIN, 0}};
      const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(next_sample - now).count() + 1;
      const int ready = poll(fds, 4, static_cast<int>(wait_ms));
      if (ready < 0) {
        // A running job is never ended for gpureap's own trouble: the next turn polls again
        // (after the wait it asked for, so that a persistent error does not spin).
        const int error = errno;
        if (error == EINTR) continue;
        if (!poll_error_noted_) {
          poll_error_noted_ = true;
          report_.notes.push_back(fmt::format("waiting for signals failed ({}); gpureap kept watching the job",
                                              std::strerror(error)));
        }
        ::poll(nullptr, 0, static_cast<int>(wait_ms));
        continue;
      }
      if (fds[0].revents & POLLIN) read_signals();
      if (exit_events_ && (fds[1].revents & POLLIN)) read_exit_events();
      if (holders_ && ((fds[2].revents | fds[3].revents) & POLLIN)) read_holder_events();
    }
  }

  // GPUs the job was never seen on whose memory that no listed process holds grew while it ran
  // (a leak in its first moments, before the first look): verified like the others, against
  // that growth.
  void add_gpus_never_seen() {
    if (!start_reading_) return;
    const auto now = driver().read_driver_only();
    if (!now) return;
    auto unlisted = [](const GpuReading& gpu) -> std::optional<std::uint64_t> {
      if (gpu.error || !gpu.memory.used) return std::nullopt;
      std::uint64_t listed = 0;
      for (const auto& p : gpu.processes) listed += p.used_memory.value_or(0);
      return *gpu.memory.used > listed ? *gpu.memory.used - listed : 0;
    };
    for (const auto& before : start_reading_->gpus) {
      if (has_gpu(before.index)) continue;
      for (const auto& after : now->gpus) {
        if (after.index != before.index) continue;
        const auto was = unlisted(before);
        const auto is = unlisted(after);
        if (!was || !is || *is <= *was + kUnexplainedToleranceBytes) continue;
        GpuUse& use = gpu_use(before.index);
        use.seen = false;
        use.used_first_bytes = before.memory.used;
        use.used_at_end_bytes = after.memory.used;
        use.job_last_bytes = *is - *was;
        use.job_peak_bytes = use.job_last_bytes;
      }
    }
  }

  void end_what_is_left() {
    ending_ = true;
    // A last look when something is left: the baseline the release is verified against, even
    // for a job that ended before its first look.
    if (!list_members(membership()).empty()) sample();
    add_gpus_never_seen();
    EndingSettings ending;
    ending.kill_timeout = settings_.kill_timeout;
    ending.verify_timeout = settings_.verify_timeout;
    ending.dump = settings_.dump_on_hang;
    ending.evidence_dir = settings_.evidence_dir;
    ending.collect_all_evidence = report_.end == JobEnd::Hung;
    ending.audit = settings_.audit;
    ending.proc_root = settings_.proc_root;
    ending.dev_dir = settings_.dev_dir;
    ending.membership = membership();
    ending.sm_util = last_sm_util_;
    ending.reap = [this]() { reap_children(); };
    ending.driver = [this]() -> SnapshotSource& { return driver(); };
    // What survived SIGTERM is looked at again: a process that opened a GPU while the job was
    // ending (a worker's cleanup) has that GPU's release verified too.
    ending.look = [this]() {
      if (!list_members(membership()).empty()) sample();
    };
    ending.last_reading = &last_reading_;
    end_job(ending, report_);
    reap_children();
    if (cgroup_) {
      report_.cgroup_removed = cgroup_->remove();
      if (!report_.cgroup_removed) {
        report_.notes.push_back("the job's cgroup " + cgroup_->path() + " still holds a process and was left in place");
      }
    }
  }

  const RunSettings& settings_;
  RunReport& report_;
  sigset_t original_mask_{};
  procfs::unique_fd signal_fd_;
  std::optional<JobCgroup> cgroup_;
  std::optional<holders::ProcessEvents> exit_events_;
  std::unique_ptr<holders::HolderTracker> holders_;  // null: the looks alone find holders
  std::set<std::pair<pid_t, std::uint64_t>> holders_looked_at_;  // by PID and start time
  bool take_terminal_ = false;
  bool interactive_ = false;  // started in the terminal's foreground: stops and resumes with its job
  bool poll_error_noted_ = false;
  bool looked_at_stop_ = false;  // the look before the first stop signal is forwarded
  std::optional<DriverReading> start_reading_;
  bool ending_ = false;
  bool events_lost_noted_ = false;
  Clock::time_point start_;
  Clock::time_point last_active_;
  std::unique_ptr<SnapshotSource> source_;
  std::optional<DriverReading> last_reading_;
  std::map<pid_t, GpuUser> gpu_users_;
  std::map<std::pair<pid_t, std::uint64_t>, std::uint64_t> last_cpu_;
  std::map<pid_t, unsigned> last_sm_util_;
};

}  // namespace

RunReport run_job(const RunSettings& settings) {
  RunReport report;
  report.argv = settings.argv;
  Guard guard(settings, report);
  guard.run();
  return report;
}

}  // namespace gpureap::job
