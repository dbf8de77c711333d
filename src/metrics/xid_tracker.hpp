// gpureap_xid_events_total and gpureap_xid_last_event_timestamp_seconds: Xid events counted
// as the kernel log grows. The first read counts what the log holds then (its history, once);
// every later one only what was logged since, so a counter never counts an event twice.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "doctor/kernel_log.hpp"
#include "metrics/metric_set.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

struct XidTrackerOptions {
  std::string kernel_log_file;  // a saved or growing log file; "" reads kmsg_path
  std::string kmsg_path = "/dev/kmsg";
  std::string proc_root = "/proc";  // its uptime dates /dev/kmsg records
  // What a saved log's first updates read each (kernel_log.hpp): a daemon's looks stay short;
  // a single collection (export --once) reads the whole log.
  std::uint64_t history_bytes = kMaxKernelLogHistoryBytes;
};

class XidTracker {
 public:
  explicit XidTracker(XidTrackerOptions options);

  // Reads what the log gained and counts it, each event under the GPU the snapshot has at its
  // PCI address (the address itself when none: a GPU that fell off the bus). False when the
  // log could not be read; why in last_error().
  bool update(const Snapshot& snapshot);
  const std::string& last_error() const { return last_error_; }

  void add_metrics(MetricSet& metrics) const;

 private:
  struct Series {
    std::uint64_t events = 0;
    double last_timestamp = 0;  // Unix seconds
  };
  // Distinct (gpu, xid) pairs kept at most: a log full of made-up addresses must not grow the
  // exporter's memory (or the scrape) without bound.
  static constexpr std::size_t kMaxSeries = 4096;

  XidTrackerOptions options_;
  KernelLogFollower follower_;
  std::map<std::pair<std::string, unsigned>, Series> series_;
  std::string last_error_;
};

// "" when the last update read the log; else one line for a person ("Xid events not counted: ...").
std::string xid_problem(const XidTracker& tracker);

}  // namespace gpureap
