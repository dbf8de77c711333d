// What `gpureap watch --listen` serves (docs/metrics.md): after each look, the families of the
// last full scan's snapshot (as `export` gives them from one) and the gpureap_watch_* counters
// as they are now. A scrape only copies what was published: it never reads the driver.
#pragma once

#include "metrics/collector.hpp"
#include "metrics/metric_set.hpp"
#include "metrics/snapshot_metrics.hpp"
#include "watch/observation.hpp"
#include "watch/watch_counters.hpp"

namespace gpureap {

// gpureap_watch_*: the counters with their declared zero-valued series.
void add_watch_counter_metrics(const WatchCounters& counters, MetricSet& metrics);

// The daemon's on_look: keeps the families of the newest full scan (the quick looks between
// two read the driver's process lists only, not every family's facts) and publishes them with
// the counters after every look, so counters move within one interval.
class WatchMetricsPublisher {
 public:
  WatchMetricsPublisher(PublishedCollector& collector, const CounterBoard& counters, SnapshotMetricsOptions options)
      : collector_(collector), counters_(counters), options_(options) {}

  void on_look(const Look& look);

 private:
  PublishedCollector& collector_;
  const CounterBoard& counters_;
  SnapshotMetricsOptions options_;
  MetricSet scanned_;  // the last full scan's families
};

}  // namespace gpureap
