// Terminations off the daemon's loop: each due process is ended (termination.hpp) on one of at
// most kMaxLadders threads, so that while a ladder waits out a long kill_timeout the loop keeps
// looking and judging and other rules still fire. A process already being ended is not started
// twice. A stop interrupts every ladder under way (each continues what it stopped and reports);
// the daemon collects the reports before it exits.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_log.hpp"
#include "kill/interrupt_guard.hpp"
#include "proc/wake_signal.hpp"
#include "snapshot/snapshot.hpp"
#include "watch/policy.hpp"
#include "watch/rule_book.hpp"
#include "watch/termination.hpp"

namespace gpureap {

// Ladders under way at once; a due process beyond them waits for the next look.
inline constexpr std::size_t kMaxLadders = 4;

struct TerminationJob {
  std::shared_ptr<const Policy> policy;  // keeps `decision.rule` alive across a reload
  Decision decision;                     // the Due decision, as the look made it
  std::shared_ptr<const AuditLog> audit;  // kept across a reload that changes the log
  TerminationSettings settings;           // its interruption and audit are the worker's to set
};

struct FinishedTermination {
  TerminationJob job;
  TerminationResult result;
};

class TerminationWorkers {
 public:
  // `snapshots`: the daemon's; each thread takes its own snapshots of every process with them.
  // `still_holds` is called on the worker threads (the daemon guards its rule book).
  using StillHoldsCheck = std::function<bool(const Rule& rule, const Candidate& seen, const Candidate& fresh,
                                             double seconds_since, const std::map<unsigned, std::string>& gpu_uuids)>;
  TerminationWorkers(const SnapshotOptions& snapshots, StillHoldsCheck still_holds);
  ~TerminationWorkers();  // interrupts and joins: a ladder is never abandoned half-way
  TerminationWorkers(const TerminationWorkers&) = delete;
  TerminationWorkers& operator=(const TerminationWorkers&) = delete;

  // Starts ending the job's process; false (nothing done) when that process is being ended
  // already or kMaxLadders are under way.
  bool start(TerminationJob job);
  bool ending(const RuleBook::Key& key) const;
  std::size_t under_way() const;
  // Readable when a termination has finished: the loop polls it beside its signals.
  int fd() const { return wake_.fd(); }
  std::vector<FinishedTermination> take_finished();
  // A stop: every ladder under way (and any later one) stops between its steps.
  void interrupt(int signal) { interruption_.request(signal); }
  // Waits until none is under way (after interrupt(): each returns promptly).
  void wait_idle();

 private:
  void run();

  SnapshotOptions snapshots_;
  StillHoldsCheck still_holds_;
  InterruptRequest interruption_;
  WakeSignal wake_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<TerminationJob> queue_;
  std::set<RuleBook::Key> ending_;  // queued or under way
  std::vector<FinishedTermination> finished_;
  std::size_t idle_threads_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gpureap
