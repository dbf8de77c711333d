#include "watch/termination_worker.hpp"

#include <exception>
#include <string>
#include <system_error>
#include <utility>

namespace gpureap {

TerminationWorkers::TerminationWorkers(const SnapshotOptions& snapshots, StillHoldsCheck still_holds)
    : snapshots_(snapshots), still_holds_(std::move(still_holds)) {
  // The loop's event-kept holders and fd memory are its own; an action reads every process anew.
  snapshots_.holder_events.reset();
  snapshots_.proc.memory.reset();
  snapshots_.proc.only_pids.reset();
}

TerminationWorkers::~TerminationWorkers() {
  interrupt(SIGTERM);
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  changed_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

bool TerminationWorkers::start(TerminationJob job) {
  const RuleBook::Key key = job.decision.candidate.key();
  {
    const std::lock_guard lock(mutex_);
    if (stopping_ || ending_.count(key) > 0 || ending_.size() >= kMaxLadders) return false;
    // One thread per ladder under way, made when none is idle (the threads stay for the next).
    if (idle_threads_ == 0) {
      try {
        threads_.emplace_back([this] { run(); });
        ++idle_threads_;
      } catch (const std::system_error&) {
        if (threads_.empty()) return false;  // no thread to be had: it stays due
      }
    }
    ending_.insert(key);
    queue_.push_back(std::move(job));
  }
  changed_.notify_one();
  return true;
}

bool TerminationWorkers::ending(const RuleBook::Key& key) const {
  const std::lock_guard lock(mutex_);
  return ending_.count(key) > 0;
}

std::size_t TerminationWorkers::under_way() const {
  const std::lock_guard lock(mutex_);
  return ending_.size();
}

std::vector<FinishedTermination> TerminationWorkers::take_finished() {
  wake_.drain();
  const std::lock_guard lock(mutex_);
  return std::exchange(finished_, {});
}

void TerminationWorkers::wait_idle() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return ending_.empty(); });
}

void TerminationWorkers::run() {
  // The thread's own driver handle and /proc reads: the loop's are never shared across threads.
  SnapshotSource source(snapshots_);
  UserNames names;
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;
    TerminationJob job = std::move(queue_.front());
    queue_.pop_front();
    --idle_threads_;
    lock.unlock();

    job.settings.interruption = interruption_.interruption();
    job.settings.audit = job.audit.get();
    const Rule& rule = *job.decision.rule;
    const Candidate& seen = job.decision.candidate;
    // The CPU allowed since the look is counted from when that look's CPU was read.
    const auto cpu_read_at = seen.cpu_read_at;
    const StillHolds still_holds = [&](const Candidate& fresh, const std::map<unsigned, std::string>& uuids) {
      const double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - cpu_read_at).count();
      return still_holds_(rule, seen, fresh, since, uuids);
    };
    FinishedTermination done;
    try {
      done.result = terminate_candidate(source, still_holds, rule, seen, job.settings, names);
    } catch (const std::exception& error) {
      // Nothing was signalled (the engine's own failures come back as outcomes): judged again later.
      done.result.outcome = "not-judgeable";
      done.result.message = std::string("the process could not be read again: ") + error.what();
    }
    done.job = std::move(job);

    lock.lock();
    ending_.erase(done.job.decision.candidate.key());
    finished_.push_back(std::move(done));
    ++idle_threads_;
    wake_.notify();
    changed_.notify_all();
  }
}

}  // namespace gpureap
