#include "watch/watch_daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <array>
#include <deque>
#include <mutex>

#include <fmt/format.h>

#include "http/http_module.hpp"
#include "audit/audit_log.hpp"
#include "proc/proc_io.hpp"
#include "accounts/user_names.hpp"
#include "text/human_format.hpp"
#include "text/signal_names.hpp"
#include "watch/event_log.hpp"
#include "watch/notifier.hpp"
#include "watch/observation.hpp"
#include "watch/poll_timeout.hpp"
#include "watch/rule_book.hpp"
#include "watch/termination.hpp"
#include "watch/termination_worker.hpp"

namespace gpureap {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kNotificationBudgetAtStop{1500};
// The least time between two wakes for the holder events. An open of a GPU node (fanotify) is
// rare: a look at most kOpenWakeGap after one. The connector reports every fork and exit on the
// host: at most one wake per kForkWakeGap for it, so that a busy host costs a few reads a second.
constexpr std::chrono::milliseconds kOpenWakeGap{20};
constexpr std::chrono::milliseconds kForkWakeGap{250};

double unix_now() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// NVIDIA's GPUs by index, then AMD's and Intel's by PCI address.
std::string gpu_list(const Candidate& c) {
  std::string out;
  for (unsigned g : c.gpus) out += fmt::format("{}{}", out.empty() ? "" : ",", g);
  for (const auto& [pci, bytes] : c.drm_memory) out += fmt::format("{}{}", out.empty() ? "" : ",", pci);
  return out;
}



// What a person reads first in a notice: why this process matched.
std::string condition_text(const Rule& rule, const Candidate& c) {
  switch (rule.condition) {
    case Condition::Idle:
      return fmt::format("idle for {} (SM utilisation at most {}%, CPU at most {}% of a core)", format_short_duration(rule.idle_seconds),
                         rule.max_sm_util_percent, rule.max_cpu_percent);
    case Condition::OverAge:
      return fmt::format("running for {}, longer than {}", format_short_duration(c.age_seconds), format_short_duration(rule.older_than_seconds));
    case Condition::Memory:
      return fmt::format("holds {} of GPU memory, more than {}", format_bytes(c.memory_bytes()),
                         format_bytes(rule.memory_above_bytes));
    case Condition::Orphan:
      return fmt::format("holds GPU {} for a job that is over ({})", gpu_list(c), orphan_evidence_name(c.orphan_evidence));
    case Condition::Zombie: return fmt::format("a zombie its parent {} has not reaped", c.parent);
  }
  return "";
}

// "" when root may run `program` for every notification: an executable regular file that,
// with its directory, only root or the user running watch can change.
std::string notify_program_problem(const std::string& program) {
  const procfs::unique_fd fd(::open(program.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return fmt::format("cannot open {}: {}", program, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return fmt::format("{} is not a regular file", program);
  if ((st.st_mode & 0111) == 0 || ::faccessat(AT_FDCWD, program.c_str(), X_OK, AT_EACCESS) != 0) {
    return fmt::format("{} is not executable", program);
  }
  if (std::string why = procfs::untrusted_file_reason(fd.get(), program); !why.empty()) return program + " " + why;
  return {};
}

// SIGTERM, SIGINT and SIGHUP, read from a signalfd by the loop, which passes a stop on to the
// ladders under way (TerminationWorkers::interrupt), so that a stop never waits for a ladder.
class SignalReader {
 public:
  SignalReader() {
    sigset_t mask;
    sigemptyset(&mask);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&mask, sig);
    // Blocked in every thread (the notifier's is created after), read from the signalfd. They
    // stay blocked when the daemon returns: the process is ending, and a second SIGTERM that
    // arrived meanwhile must not turn a clean stop into death by signal.
    pthread_sigmask(SIG_BLOCK, &mask, nullptr);
    fd_ = procfs::unique_fd(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
    // A notification command that closes its stdin early must not end the daemon.
    ::signal(SIGPIPE, SIG_IGN);
  }
  SignalReader(const SignalReader&) = delete;
  SignalReader& operator=(const SignalReader&) = delete;

  bool valid() const { return static_cast<bool>(fd_); }
  // Waits up to `timeout` for a signal, or until one of `also` is readable (which ones, in
  // *readable: also's order); 0 when no signal came. A stop asked for stays the answer. The
  // signalfd is read only when the poll says a signal is queued: a wake by `also` costs no read.
  int wait(std::chrono::milliseconds timeout, const std::vector<int>& also, std::vector<bool>* readable) {
    readable->assign(also.size(), false);
    bool signalled = true;
    if (stop_ == 0 && !reload_) {
      std::vector<pollfd> p{{fd_.get(), POLLIN, 0}};
      for (const int fd : also) p.push_back({fd, POLLIN, 0});
      const int ready = ::poll(p.data(), p.size(), static_cast<int>(std::max<long long>(0, timeout.count())));
      signalled = ready < 0 || (p[0].revents & POLLIN) != 0;
      for (std::size_t i = 1; i < p.size(); ++i) (*readable)[i - 1] = (p[i].revents & POLLIN) != 0;
    }
    if (signalled) drain();
    if (stop_ != 0) return stop_;
    if (reload_) {
      reload_ = false;
      return SIGHUP;
    }
    return 0;
  }
  int stop_requested() const { return stop_; }

 private:
  // Every signal that arrived, without waiting: a stop is kept, a reload remembered.
  void drain() {
    signalfd_siginfo info{};
    while (::read(fd_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGHUP) reload_ = true;
      else if (stop_ == 0) stop_ = sig;
    }
  }

  procfs::unique_fd fd_;
  int stop_ = 0;
  bool reload_ = false;
};

class WatchDaemon {
 public:
  WatchDaemon(const WatchDaemonOptions& options, CounterBoard& counters, SignalReader& signals)
      : options_(options),
        signals_(signals),
        log_(options.log_fd),
        counters_(counters),
        observer_(options.snapshot, 300),
        notifier_(log_, counters_),
        workers_(options.snapshot, [this](const Rule& rule, const Candidate& seen, const Candidate& fresh, double since,
                                          const std::map<unsigned, std::string>& uuids) {
          const std::lock_guard lock(book_mutex_);
          return book_.still_holds(rule, seen, fresh, since, uuids);
        }) {}

  ~WatchDaemon() {
    workers_.interrupt(SIGTERM);
    workers_.wait_idle();
    notifier_.stop(std::chrono::milliseconds(0));
  }

  // The first policy: its GPUs are checked against this host once the driver has been read.
  // "" when it runs; else why it cannot (nothing was done).
  std::string start(EffectivePolicy initial) {
    std::string error;
    if (!open_audit(initial.audit_log, error)) return error;
    install(std::move(initial));
    Look first = observer_.look(true);
    if (first.driver_readable) {
      if (std::string gpus = check_policy_gpus(*policy_, first.gpu_uuids); !gpus.empty()) return gpus;
    }
    note_drm_gpus(first);
    if (std::string gpus = check_policy_drm_gpus(*policy_, drm_gpus_); !gpus.empty()) return gpus;
    log_.write(LogPriority::Info, "start",
               {{"policy", policy_->source},
                {"mode", std::string(watch_mode_name(policy_->mode))},
                {"rules", std::to_string(policy_->rules.size())},
                {"interval", format_short_duration(policy_->interval_seconds)},
                {"full_scan", format_short_duration(policy_->full_scan_seconds)},
                {"driver_reads", driver_reads()},
                {"audit_log", audit_ ? audit_->path() : ""}});
    evaluate(first);
    return {};
  }

  // How often the quick looks read the driver, for the start line.
  std::string driver_reads() const {
    if (observer_.driver_every_look()) return "every-look";
    const double every = driver_read_seconds(*policy_);
    return std::isinf(every) ? "full-scans" : format_short_duration(every);
  }

  int run() {
    auto next = Clock::now() + interval();
    // The kernel's holder events wake it too (an open; a holder's fork or exit), each source
    // heard again only after its gap since the last wake: each wake reads all that is queued.
    std::array<Clock::time_point, 2> heard_from{Clock::now(), Clock::now()};  // opens, forks
    const std::array<Clock::duration, 2> gap{kOpenWakeGap, kForkWakeGap};
    for (;;) {
      std::vector<int> events;
      auto until = next;
      if (options_.snapshot.holder_events) {
        const std::vector<int> fds = options_.snapshot.holder_events->event_fds();  // the fanotify group, the connector
        const auto now = Clock::now();
        for (std::size_t i = 0; i < fds.size() && i < heard_from.size(); ++i) {
          if (now >= heard_from[i]) {
            events.push_back(fds[i]);
          } else {
            until = std::min(until, heard_from[i]);
          }
        }
      }
      std::vector<int> wake_on{workers_.fd()};
      wake_on.insert(wake_on.end(), events.begin(), events.end());
      const auto left = poll_timeout<Clock>(until, Clock::now());
      std::vector<bool> woken;  // by the worker fd, then by each of `events`
      const int sig = signals_.wait(left, wake_on, &woken);
      if (sig == SIGTERM || sig == SIGINT) {
        // Every ladder under way continues what it stopped and reports before the stop line.
        workers_.interrupt(sig);
        workers_.wait_idle();
        report_finished();
        rusage usage{};
        getrusage(RUSAGE_SELF, &usage);
        const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
        log_.write(LogPriority::Info, "stop",
                   {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"},
                    {"looks", std::to_string(observer_.quick_looks() + observer_.full_scans())},
                    {"full_scans", std::to_string(observer_.full_scans())},
                    {"cpu_seconds", fmt::format("{:.3f}", seconds(usage.ru_utime) + seconds(usage.ru_stime))},
                    {"driver_cpu_seconds", fmt::format("{:.3f}", observer_.driver_cpu_seconds())}});
        notifier_.stop(kNotificationBudgetAtStop);
        return 0;
      }
      // A ladder that ended is looked at again at once: the served page then carries its
      // counters beside what the GPUs show after it, not a look older than its report.
      if (report_finished()) next = Clock::now();
      if (sig == SIGHUP) {
        reload();
        continue;
      }
      if (sig != 0) continue;
      if (Clock::now() < next) {
        // Woken by the events: a holder that came or went is judged now, not at the next look.
        if (std::find(woken.begin() + 1, woken.end(), true) != woken.end()) {
          for (std::size_t i = 0; i < heard_from.size(); ++i) heard_from[i] = Clock::now() + gap[i];
          if (options_.snapshot.holder_events->changed_since_scan()) evaluate(observer_.look(false));
        }
        continue;
      }
      evaluate(observer_.look(force_full_));
      force_full_ = false;
      next += interval();
      if (next < Clock::now()) next = Clock::now() + interval();  // a slow look: no burst of catch-up looks
    }
  }

 private:
  Clock::duration interval() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(policy_->interval_seconds));
  }

  bool open_audit(const std::string& path, std::string& error) {
    if (path.empty()) {
      audit_.reset();
      return true;
    }
    if (audit_ && audit_->path() == path) return true;
    auto opened = AuditLog::open(path, Requester::current(), error);
    if (!opened) return false;
    audit_ = std::make_shared<const AuditLog>(std::move(*opened));
    return true;
  }

  void install(EffectivePolicy effective) {
    policy_ = effective.policy;
    {
      const std::lock_guard lock(book_mutex_);
      book_.set_policy(policy_);
    }
    notifier_.configure(policy_->notify);
    observer_.set_full_scan_seconds(policy_->full_scan_seconds);
    observer_.set_driver_read_seconds(driver_read_seconds(*policy_));
    for (const Rule& r : policy_->rules) {
      counters_.declare(&WatchCounters::policy_matches, {r.name, std::string(rule_action_name(r.action))});
      if (r.action != RuleAction::Terminate) continue;
      for (const char* outcome : {"exited", "killed", "survived", "refused"}) {
        counters_.declare(&WatchCounters::terminations, {std::string(condition_name(r.condition)), outcome});
      }
    }
  }

  void reload() {
    std::string error;
    auto policy = load_policy(options_.policy_path, error);
    std::optional<EffectivePolicy> effective;
    if (policy) effective = effective_policy(std::move(*policy), options_, error);
    if (effective && last_gpu_uuids_) error = check_policy_gpus(*effective->policy, *last_gpu_uuids_);
    if (effective && error.empty()) error = check_policy_drm_gpus(*effective->policy, drm_gpus_);
    if (effective && error.empty()) open_audit(effective->audit_log, error);
    if (!effective || !error.empty()) {
      log_.write(LogPriority::Error, "reload-failed", {{"why", error}, {"kept", policy_->source}});
      return;
    }
    install(std::move(*effective));
    force_full_ = true;
    log_.write(LogPriority::Info, "reload",
               {{"policy", policy_->source},
                {"mode", std::string(watch_mode_name(policy_->mode))},
                {"rules", std::to_string(policy_->rules.size())},
                {"interval", format_short_duration(policy_->interval_seconds)}});
  }

  // The driver's state, logged when it changes (not at every look).
  void note_driver(const Look& look) {
    const std::string problem = look.driver_readable ? "" : look.driver_problem;
    if (problem != driver_problem_) {
      if (problem.empty()) {
        log_.write(LogPriority::Info, "driver-readable", {});
      } else {
        log_.write(LogPriority::Warning, "driver-unreadable",
                   {{"why", problem}, {"effect", "GPU processes are not judged until it can be read again"}});
      }
      driver_problem_ = problem;
    }
    if (look.unreadable_gpus != unreadable_gpus_) {
      for (unsigned g : look.unreadable_gpus) {
        if (!unreadable_gpus_.count(g)) {
          log_.write(LogPriority::Warning, "gpu-unreadable",
                     {{"gpu", std::to_string(g)}, {"effect", "its processes are not judged until it can be read again"}});
        }
      }
      unreadable_gpus_ = look.unreadable_gpus;
    }
    if (look.driver_readable) last_gpu_uuids_ = look.gpu_uuids;
    note_drm_gpus(look);
  }

  // Without the kernel's events every full scan walks /proc, and a new holder waits for the
  // next one: said once.
  // A holder a walk found that the events had missed is a fault: logged with what the events
  // said of it.
  void note_holder_events(const Look& look) {
    if (!look.snapshot || !look.snapshot->holder_events) return;
    for (const std::string& note : look.snapshot->holder_events->missed_notes) {
      log_.write(LogPriority::Warning, "holder-missed", {{"how", note}});
    }
    if (holder_fallback_told_ || look.snapshot->holder_events->active) return;
    holder_fallback_told_ = true;
    log_.write(LogPriority::Warning, "holder-events-off",
               {{"why", look.snapshot->holder_events->fallback_reason},
                {"effect", "a process that opens a GPU device file or a holder's new child waits for the next full scan"}});
  }

  // The AMD and Intel GPUs of the last full scan, by PCI address.
  void note_drm_gpus(const Look& look) {
    if (!look.snapshot) return;
    drm_gpus_.clear();
    for (const auto& device : look.snapshot->drm.devices) drm_gpus_.push_back(device.pci_address);
  }

  void evaluate(const Look& look) {
    note_driver(look);
    note_holder_events(look);
    if (look.full_scan) {
      log_.write(LogPriority::Debug, "scan",
                 {{"candidates", std::to_string(look.candidates.size())}, {"frozen", std::to_string(look.frozen.size())}});
    }
    std::vector<Decision> decisions;
    {
      const std::lock_guard lock(book_mutex_);
      decisions = book_.evaluate(look);
    }
    for (const Decision& d : decisions) {
      switch (d.kind) {
        case DecisionKind::Notice: notice(d); break;
        case DecisionKind::Due: due(d); break;
        case DecisionKind::Cleared: settled("cleared", d, "it no longer matches"); break;
        case DecisionKind::Gone: settled("gone", d, "it ended or stopped using a GPU"); break;
      }
    }
    if (options_.on_look) options_.on_look(look);
  }

  WatchEvent event_for(WatchEventKind kind, const Decision& d, std::string message) const {
    WatchEvent e;
    e.kind = kind;
    e.mode = policy_->mode;
    e.rule = d.rule->name;
    e.condition = d.rule->condition;
    e.action = d.rule->action;
    e.grace_seconds = d.grace_left_seconds;
    e.process = d.candidate;
    e.message = std::move(message);
    e.unix_time = unix_now();
    return e;
  }

  void notice(const Decision& d) {
    const Rule& rule = *d.rule;
    const Candidate& c = d.candidate;
    counters_.add(&WatchCounters::policy_matches, {rule.name, std::string(rule_action_name(rule.action))});
    std::string then;
    if (rule.action == RuleAction::Terminate) {
      const bool enforce = policy_->mode == WatchMode::Enforce;
      const std::string verb = c.kind == CandidateKind::Zombie
                                   ? (enforce ? "its parent will be reminded (SIGCHLD)" : "its parent would be reminded (dry run)")
                                   : (enforce ? "will be ended" : "would be ended (dry run)");
      then = d.grace_left_seconds > 0 ? fmt::format("{} in {} if it still matches", verb, format_short_duration(d.grace_left_seconds))
                                      : verb + " now";
    }
    const std::string message = fmt::format("PID {} of {}: {}{}{}", c.pid, c.user, condition_text(rule, c),
                                            then.empty() ? "" : "; ", then);
    log_.write(LogPriority::Notice, "notice",
               {{"rule", rule.name},
                {"condition", std::string(condition_name(rule.condition))},
                {"action", std::string(rule_action_name(rule.action))},
                {"mode", std::string(watch_mode_name(policy_->mode))},
                {"pid", std::to_string(c.pid)},
                {"kind", std::string(candidate_kind_name(c.kind))},
                {"user", c.user},
                {"gpus", gpu_list(c)},
                {"memory", format_bytes(c.memory_bytes())},
                {"age", format_short_duration(c.age_seconds)},
                {"due_in", rule.action == RuleAction::Terminate ? format_short_duration(d.grace_left_seconds) : ""},
                {"command", c.command},
                {"message", message}});
    if (rule.action != RuleAction::Log) notifier_.send(event_for(WatchEventKind::Notice, d, message));
  }

  void settled(std::string_view what, const Decision& d, std::string_view why) {
    log_.write(LogPriority::Info, what,
               {{"rule", d.rule->name}, {"pid", std::to_string(d.candidate.pid)}, {"why", std::string(why)}});
  }

  // The cap: terminations (or, in dry-run, what would have been) in the window so far, and
  // those under way.
  bool under_cap(const Decision& d) {
    const auto now = Clock::now();
    const auto window = std::chrono::duration<double>(policy_->cap_window());
    while (!ended_at_.empty() && now - ended_at_.front() >= window) ended_at_.pop_front();
    if (ended_at_.size() + workers_.under_way() < policy_->max_terminations) return true;
    const std::lock_guard lock(book_mutex_);
    if (book_.mark_capped(*d.rule, d.candidate.key())) {
      counters_.add_capped();
      log_.write(LogPriority::Warning, "capped",
                 {{"rule", d.rule->name},
                  {"pid", std::to_string(d.candidate.pid)},
                  {"limit", fmt::format("{} per {}", policy_->max_terminations, format_short_duration(policy_->cap_window()))},
                  {"effect", "deferred until the window has room; it must still match then"}});
    }
    return false;
  }

  void due(const Decision& d) {
    const Rule& rule = *d.rule;
    const Candidate& c = d.candidate;
    // Being ended (under another rule, or still under this one): not started twice.
    if (workers_.ending(c.key())) return;
    if (!under_cap(d)) return;
    const std::string reason(condition_name(rule.condition));
    if (policy_->mode == WatchMode::DryRun) {
      mark_acted(rule, c.key());
      ended_at_.push_back(Clock::now());
      counters_.add(&WatchCounters::terminations, {reason, "dry-run"});
      const std::string message =
          c.kind == CandidateKind::Zombie
              ? fmt::format("dry run: would send SIGCHLD to PID {}, the parent of zombie {}", c.parent, c.pid)
              : fmt::format("dry run: would end PID {} of {} (SIGTERM, SIGKILL after {}) and verify its GPU memory is freed",
                            c.pid, c.user, format_short_duration(policy_->kill_timeout_seconds));
      log_.write(LogPriority::Notice, "would-terminate",
                 {{"rule", rule.name}, {"pid", std::to_string(c.pid)}, {"user", c.user}, {"message", message}});
      WatchEvent e = event_for(WatchEventKind::Action, d, message);
      e.outcome = "dry-run";
      notifier_.send(std::move(e));
      return;
    }
    if (const int stop = signals_.stop_requested(); stop != 0) {
      // Stopping: no new ladder. The process stays due for the next start.
      log_.write(LogPriority::Info, "not-terminated",
                 {{"rule", rule.name},
                  {"pid", std::to_string(c.pid)},
                  {"outcome", "stopping"},
                  {"why", fmt::format("watch is stopping ({})", signal_name(stop))}});
      return;
    }
    TerminationJob job;
    job.policy = policy_;
    job.decision = d;
    job.audit = audit_;
    job.settings.kill_timeout_seconds = policy_->kill_timeout_seconds;
    job.settings.verify_timeout_seconds = policy_->verify_timeout_seconds;
    job.settings.protect = options_.protect;
    // Not started (kMaxLadders under way): it stays due, and the next look tries again.
    if (workers_.start(std::move(job))) mark_acted(rule, c.key());
  }

  void mark_acted(const Rule& rule, const RuleBook::Key& key) {
    const std::lock_guard lock(book_mutex_);
    book_.mark_acted(rule, key);
  }

  // What the ladders that ended since the last call did: logged, counted and notified here, on
  // the loop's thread.
  bool report_finished() {
    std::vector<FinishedTermination> ended = workers_.take_finished();
    for (FinishedTermination& done : ended) finished(done);
    return !ended.empty();
  }

  void finished(const FinishedTermination& done) {
    const Decision& d = done.job.decision;
    const Rule& rule = *d.rule;
    const Candidate& c = d.candidate;
    const TerminationResult& result = done.result;
    const std::string reason(condition_name(rule.condition));
    force_full_ = true;  // what it ended (or did not) is read again at the next look
    if (result.outcome == "gone" || result.outcome == "no-longer-matches" || result.outcome == "not-judgeable") {
      {
        const std::lock_guard lock(book_mutex_);
        book_.unmark_acted(rule, c.key());  // nothing was done: it may be due again
      }
      log_.write(LogPriority::Info, "not-terminated",
                 {{"rule", rule.name}, {"pid", std::to_string(c.pid)}, {"outcome", result.outcome}, {"why", result.message}});
      return;
    }
    if (result.acted) ended_at_.push_back(Clock::now());
    counters_.add(&WatchCounters::terminations, {reason, result.outcome});
    counters_.add_memory_freed(result.freed_bytes);
    std::string also;
    for (pid_t pid : result.also_ended) also += fmt::format("{}{}", also.empty() ? "" : ",", pid);
    const bool good = result.outcome == "exited" || result.outcome == "killed" || result.outcome == "parent-nudged";
    log_.write(good ? LogPriority::Notice : LogPriority::Warning, "terminate",
               {{"rule", rule.name},
                {"pid", std::to_string(c.pid)},
                {"user", c.user},
                {"outcome", result.outcome},
                {"verified", result.verified ? "yes" : "no"},
                {"freed", format_bytes(result.freed_bytes)},
                {"also_ended", also},
                {"message", result.message}});
    WatchEvent e = event_for(WatchEventKind::Action, d, result.message);
    e.outcome = result.outcome;
    e.freed_bytes = result.freed_bytes;
    notifier_.send(std::move(e));
  }

  const WatchDaemonOptions& options_;
  SignalReader& signals_;
  EventLog log_;
  CounterBoard& counters_;
  Observer observer_;
  Notifier notifier_;
  std::shared_ptr<const Policy> policy_;
  std::mutex book_mutex_;  // the loop judges while the workers re-check before acting
  RuleBook book_;
  std::shared_ptr<const AuditLog> audit_;
  std::deque<Clock::time_point> ended_at_;
  bool force_full_ = false;
  std::string driver_problem_;
  std::set<unsigned> unreadable_gpus_;
  bool holder_fallback_told_ = false;
  std::optional<std::map<unsigned, std::string>> last_gpu_uuids_;
  std::vector<std::string> drm_gpus_;
  TerminationWorkers workers_;  // last: its threads use the members above until it is destroyed
};

}  // namespace

double watch_stop_seconds(const Policy& policy) {
  return kMaxStopSeconds + (policy.notify.command.empty() ? 0 : policy.notify.command_timeout_seconds);
}

std::optional<EffectivePolicy> effective_policy(Policy policy, const WatchDaemonOptions& options, std::string& error) {
  if (options.interval_override) {
    policy.interval_seconds = *options.interval_override;
    policy.full_scan_seconds = std::max(policy.full_scan_seconds, policy.interval_seconds);
  }
  if (options.force_dry_run) policy.mode = WatchMode::DryRun;
  EffectivePolicy out;
  out.audit_log = !options.audit_log_override.empty() ? options.audit_log_override
                  : !policy.audit_log.empty()          ? policy.audit_log
                                                       : options.config_audit_log;
  const bool terminates = std::any_of(policy.rules.begin(), policy.rules.end(),
                                      [](const Rule& r) { return r.action == RuleAction::Terminate; });
  if (policy.mode == WatchMode::Enforce && terminates && out.audit_log.empty()) {
    error = fmt::format(
        "{}: mode = \"enforce\" ends processes, and every signal must be in an audit log: set audit_log in the "
        "policy (or --audit-log, GPUREAP_AUDIT_LOG, [kill] audit_log)",
        policy.source);
    return std::nullopt;
  }
  // What the daemon opens at start, checked without creating it: --check-config refuses what
  // the start would (a directory that does not exist, a symlink, another user's file).
  if (!out.audit_log.empty()) {
    if (std::string problem = AuditLog::problem(out.audit_log); !problem.empty()) {
      error = fmt::format("{}: {}", policy.source, problem);
      return std::nullopt;
    }
  }
  if (!policy.notify.command.empty()) {
    if (std::string problem = notify_program_problem(policy.notify.command.front()); !problem.empty()) {
      error = fmt::format("{}: notify.command: {}", policy.source, problem);
      return std::nullopt;
    }
  }
  // systemd's SIGKILL after TimeoutStopSec, in the middle of a ladder, would leave processes stopped.
  if (options.stop_timeout_seconds && watch_stop_seconds(policy) > *options.stop_timeout_seconds) {
    const std::string limit = fmt::format("--stop-timeout {} (the service's TimeoutStopSec)",
                                          format_short_duration(*options.stop_timeout_seconds));
    error = policy.notify.command.empty()
                ? fmt::format("{}: a stop may take up to {}, more than {}: raise both to at least {}", policy.source,
                              format_short_duration(kMaxStopSeconds), limit, format_short_duration(kMaxStopSeconds))
                : fmt::format("{}: notify.command_timeout = {}: a stop may take up to {} ({} and a notification command "
                              "already running), more than {}: lower notify.command_timeout or raise both",
                              policy.source, format_short_duration(policy.notify.command_timeout_seconds),
                              format_short_duration(watch_stop_seconds(policy)), format_short_duration(kMaxStopSeconds), limit);
    return std::nullopt;
  }
  // The webhook is sent by the HTTP module's client: a policy with one is refused unless it
  // loads (loaded only then: a daemon without a webhook or --listen runs without HTTP code).
  if (std::string why; !policy.notify.webhook.empty() && load_http_module("", why) == nullptr) {
    error = fmt::format("{}: notify.webhook needs the HTTP module: {}", policy.source, why);
    return std::nullopt;
  }
  error.clear();
  out.policy = std::make_shared<const Policy>(std::move(policy));
  return out;
}

int run_watch_daemon(EffectivePolicy initial, const WatchDaemonOptions& options, CounterBoard& counters,
                     std::string& start_error) {
  SignalReader signals;
  if (!signals.valid()) {
    start_error = "cannot create a signalfd to receive SIGHUP and SIGTERM";
    return 1;
  }
  WatchDaemon daemon(options, counters, signals);
  start_error = daemon.start(std::move(initial));
  if (!start_error.empty()) return 2;
  return daemon.run();
}

}  // namespace gpureap
