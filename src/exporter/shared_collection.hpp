// One collection shared by every scrape, on a thread of its own:
// - a collection younger than max_age is served as it is, unless the collector can tell that
//   the host changed since (a holder kept from the kernel's events came or went);
// - otherwise a scrape waits for the next collection to finish (starting one when none runs),
//   so concurrent scrapes share one in-flight collection instead of each running their own;
// - a scrape never waits past its deadline: it then gets the last good collection marked
//   stale, or nothing when there has been none. A hung driver holds the collection thread
//   only, never the HTTP workers, and never more than one collection at a time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "metrics/collector.hpp"

namespace gpureap {

struct CollectionResult {
  std::shared_ptr<const std::string> text;  // the families in the text format
  double duration_seconds = 0;
  double finished_unix = 0;
  bool stale = false;  // the newest collection did not finish in time: this is an older one
};

class SharedCollection {
 public:
  using Clock = std::chrono::steady_clock;

  // `on_failure` hears why a collection threw (one line), on the collection thread.
  SharedCollection(Collector& collector, Clock::duration max_age,
                   std::function<void(const std::string&)> on_failure = {});
  ~SharedCollection();
  SharedCollection(const SharedCollection&) = delete;
  SharedCollection& operator=(const SharedCollection&) = delete;

  std::optional<CollectionResult> get(Clock::time_point deadline);
  // Starts a collection now without waiting for it (the first, at start-up).
  void prime();
  // Wakes every waiting scrape (each gets what it would at its deadline) and ends the
  // collection thread. False when a collection is still running after `grace` (a hung
  // driver): the thread is then left behind, still using the collector, which must outlive
  // it, as must this object; the process should exit without destroying either.
  bool stop(Clock::duration grace);

  std::uint64_t collections() const;  // collections finished, successful or not
  std::size_t waiting() const;        // scrapes waiting for a collection now

 private:
  void run();

  Collector& collector_;
  const Clock::duration max_age_;
  std::function<void(const std::string&)> on_failure_;
  mutable std::mutex mutex_;
  std::condition_variable work_;   // the collection thread waits for a request
  std::condition_variable done_;   // scrapes wait for a collection to finish
  bool requested_ = false;
  bool running_ = false;
  bool stopping_ = false;
  std::size_t waiting_ = 0;
  std::uint64_t finished_ = 0;
  std::uint64_t succeeded_ = 0;
  std::optional<CollectionResult> latest_;
  Clock::time_point latest_at_{};
  std::thread thread_;
};

}  // namespace gpureap
