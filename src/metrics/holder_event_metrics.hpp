// How the holders were found (snapshot/holder_events.hpp): kept from the kernel's events, or
// walked for want of them; and what the reconciliation walks found that the events had missed.
#pragma once

#include "metrics/metric_set.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

// Nothing when the snapshot did not use events (they were not asked for).
void add_holder_event_metrics(const Snapshot& snapshot, MetricSet& metrics);

}  // namespace gpureap
