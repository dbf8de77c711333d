#include "metrics/holder_event_metrics.hpp"

namespace gpureap {

void add_holder_event_metrics(const Snapshot& snapshot, MetricSet& metrics) {
  if (!snapshot.holder_events) return;
  const HolderEventsState& state = *snapshot.holder_events;
  metrics
      .family("gpureap_holder_events_active", MetricType::Gauge,
              "1 when the holders are kept from the kernel's events (fanotify and the process-events connector), "
              "0 when every collection walks /proc for want of them")
      .add(state.active ? 1 : 0);
  if (!state.active) return;
  metrics
      .family("gpureap_holder_walks_total", MetricType::Counter,
              "Walks of /proc that reconciled the event-kept holders (the first, each interval, after lost events)")
      .add(static_cast<double>(state.counts.walks));
  metrics
      .family("gpureap_holder_walk_missed_total", MetricType::Counter,
              "Holders a reconciliation walk found that the events had not (expected 0; a descriptor passed over a "
              "Unix socket makes no open event)")
      .add(static_cast<double>(state.counts.missed));
  metrics
      .family("gpureap_holder_events_lost_total", MetricType::Counter,
              "Times the kernel dropped events (a queue overflowed): the next collection walked /proc")
      .add(static_cast<double>(state.counts.lost));
}

}  // namespace gpureap
