// What `gpureap watch` has done, counted for an exporter (docs/metrics.md, the
// gpureap_watch_* series): policy matches by rule and action, terminations by reason and
// outcome, memory verified freed, notifications by channel and outcome, terminations the cap
// deferred. Written by the daemon's threads, read by whoever serves /metrics: every access
// goes through the board's lock, and read() hands out a copy.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace gpureap {

struct WatchCounters {
  using Labels = std::pair<std::string, std::string>;
  std::map<Labels, std::uint64_t> policy_matches;  // (rule, action)     gpureap_watch_policy_matches_total
  std::map<Labels, std::uint64_t> terminations;    // (reason, outcome)  gpureap_watch_terminations_total
  std::uint64_t memory_freed_bytes = 0;            //                    gpureap_watch_memory_freed_bytes_total
  std::map<Labels, std::uint64_t> notifications;   // (channel, outcome) gpureap_watch_notifications_total
  std::uint64_t terminations_capped = 0;           //                    gpureap_watch_terminations_capped_total
};

class CounterBoard {
 public:
  // Series that exist at zero once a policy is loaded (Prometheus sees them from the start).
  void declare(std::map<WatchCounters::Labels, std::uint64_t> WatchCounters::*family, const WatchCounters::Labels& labels);
  void add(std::map<WatchCounters::Labels, std::uint64_t> WatchCounters::*family, const WatchCounters::Labels& labels,
           std::uint64_t n = 1);
  void add_memory_freed(std::uint64_t bytes);
  void add_capped();
  WatchCounters read() const;

 private:
  mutable std::mutex mutex_;
  WatchCounters counters_;
};

}  // namespace gpureap
