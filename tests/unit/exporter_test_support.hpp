// A collector the exporter tests control: collections block at a gate until it opens, can
// fail, and are counted; and a poll with a deadline.
#pragma once

#include <poll.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>

#include "metrics/collector.hpp"

namespace gpureap::test {

class GateCollector : public Collector {
 public:
  explicit GateCollector(bool open = true) : open_(open) {}

  MetricSet collect() override {
    std::unique_lock lock(mutex_);
    ++started_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_; });
    if (fail_next_) {
      fail_next_ = false;
      throw std::runtime_error("the driver said no");
    }
    MetricSet metrics;
    metrics.family("gpureap_test_collection", MetricType::Gauge, "Which collection this is.").add(++finished_);
    return metrics;
  }

  void set_open(bool open) {
    std::lock_guard lock(mutex_);
    open_ = open;
    changed_.notify_all();
  }
  void fail_next() {
    std::lock_guard lock(mutex_);
    fail_next_ = true;
  }
  int started() {
    std::lock_guard lock(mutex_);
    return started_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_;
  bool fail_next_ = false;
  int started_ = 0;
  int finished_ = 0;
};

// Polls until predicate() holds or the time is up; returns its last value.
template <typename Predicate>
bool within(Predicate predicate, int timeout_ms = 5000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!predicate()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    poll(nullptr, 0, 5);
  }
  return true;
}

}  // namespace gpureap::test
