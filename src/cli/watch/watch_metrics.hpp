// What `gpureap watch --listen` serves (docs/metrics.md): the families `export` serves, from
// watch's own looks. A full scan's snapshot gives the per GPU, host, owner and process families
// and doctor's quick findings (checked over that snapshot: no driver call of their own); every
// look reads what the kernel log gained (the Xid counters) and publishes them with the
// gpureap_watch_* counters as they are now. A scrape only copies what was published.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "metrics/collection_errors.hpp"
#include "metrics/collector.hpp"
#include "metrics/metric_set.hpp"
#include "metrics/snapshot_metrics.hpp"
#include "metrics/xid_tracker.hpp"
#include "watch/observation.hpp"
#include "watch/watch_counters.hpp"

namespace gpureap {

// gpureap_watch_*: the counters with their declared zero-valued series.
void add_watch_counter_metrics(const WatchCounters& counters, MetricSet& metrics);

struct WatchMetricsOptions {
  SnapshotMetricsOptions snapshot;
  bool kernel_log = true;  // count Xid events (--no-kernel-log: not)
  XidTrackerOptions xid;
  // Told once per new problem with the kernel log (the driver's are the daemon's to log).
  std::function<void(const std::string&)> on_problem;
};

// The daemon's on_look: keeps what the newest full scan gave (the quick looks between two read
// the driver's process lists only, not every family's facts) and publishes it with the Xid
// counters and the watch counters after every look, so counters move within one interval.
class WatchMetricsPublisher {
 public:
  WatchMetricsPublisher(PublishedCollector& collector, const CounterBoard& counters, WatchMetricsOptions options);

  void on_look(const Look& look);

 private:
  PublishedCollector& collector_;
  const CounterBoard& counters_;
  WatchMetricsOptions options_;
  MetricSet scanned_;  // the last full scan's families and findings
  Snapshot gpus_;      // the last full scan's GPUs alone: an Xid line names its GPU by PCI address
  std::optional<XidTracker> xids_;
  CollectionErrors errors_;
};

}  // namespace gpureap
