#include "watch/watch_counters.hpp"

namespace gpureap {

void CounterBoard::declare(std::map<WatchCounters::Labels, std::uint64_t> WatchCounters::*family,
                           const WatchCounters::Labels& labels) {
  const std::lock_guard lock(mutex_);
  (counters_.*family).try_emplace(labels, 0);
}

void CounterBoard::add(std::map<WatchCounters::Labels, std::uint64_t> WatchCounters::*family,
                       const WatchCounters::Labels& labels, std::uint64_t n) {
  const std::lock_guard lock(mutex_);
  (counters_.*family)[labels] += n;
}

void CounterBoard::add_memory_freed(std::uint64_t bytes) {
  const std::lock_guard lock(mutex_);
  counters_.memory_freed_bytes += bytes;
}

void CounterBoard::add_capped() {
  const std::lock_guard lock(mutex_);
  ++counters_.terminations_capped;
}

WatchCounters CounterBoard::read() const {
  const std::lock_guard lock(mutex_);
  return counters_;
}

}  // namespace gpureap
