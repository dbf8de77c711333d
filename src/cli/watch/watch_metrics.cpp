#include "cli/watch/watch_metrics.hpp"

#include <string>

#include "metrics/holder_event_metrics.hpp"

namespace gpureap {
namespace {

void add_pairs(MetricFamily& family, const std::map<WatchCounters::Labels, std::uint64_t>& values, const char* first,
               const char* second) {
  for (const auto& [labels, n] : values) {
    family.add({{first, outside_label(labels.first)}, {second, outside_label(labels.second)}}, static_cast<double>(n));
  }
}

}  // namespace

void add_watch_counter_metrics(const WatchCounters& counters, MetricSet& metrics) {
  add_pairs(metrics.family("gpureap_watch_policy_matches_total", MetricType::Counter,
                           "Processes a watch rule matched, by rule and action."),
            counters.policy_matches, "rule", "action");
  add_pairs(metrics.family("gpureap_watch_terminations_total", MetricType::Counter,
                           "Terminations watch carried out (or, in dry-run, would have), by reason and outcome."),
            counters.terminations, "reason", "outcome");
  metrics
      .family("gpureap_watch_memory_freed_bytes_total", MetricType::Counter,
              "GPU memory the driver showed released after watch's terminations.")
      .add(static_cast<double>(counters.memory_freed_bytes));
  add_pairs(metrics.family("gpureap_watch_notifications_total", MetricType::Counter,
                           "Notifications watch sent, by channel and outcome."),
            counters.notifications, "channel", "outcome");
  metrics
      .family("gpureap_watch_terminations_capped_total", MetricType::Counter,
              "Terminations deferred because the policy's cap per window was reached.")
      .add(static_cast<double>(counters.terminations_capped));
}

WatchMetricsPublisher::WatchMetricsPublisher(PublishedCollector& collector, const CounterBoard& counters,
                                             WatchMetricsOptions options)
    : collector_(collector), counters_(counters), options_(std::move(options)), errors_(options_.on_problem) {
  if (options_.kernel_log) xids_.emplace(options_.xid);
}

void WatchMetricsPublisher::on_look(const Look& look) {
  if (look.snapshot) {
    MetricSet scanned;
    add_snapshot_metrics(*look.snapshot, options_.snapshot, scanned);
    add_holder_event_metrics(*look.snapshot, scanned);
    // Only at full scans: the checks need what quick looks do not read (memory per GPU, every
    // holder), and they cost a walk over the snapshot, not a driver call.
    add_quick_finding_metrics(*look.snapshot, scanned);
    scanned_ = std::move(scanned);
    gpus_.gpus = look.snapshot->gpus;
  }
  // The daemon logs the driver's problems itself; /proc it cannot read stops it.
  errors_.count(CollectionSource::Nvml, !look.driver_readable || !look.unreadable_gpus.empty());
  MetricSet metrics = scanned_;
  if (xids_) {
    // What the log gained since the last look: one read that finds nothing, most looks.
    xids_->update(gpus_);
    errors_.note(CollectionSource::KernelLog, xid_problem(*xids_));
    xids_->add_metrics(metrics);
  }
  errors_.add_metrics(metrics);
  add_watch_counter_metrics(counters_.read(), metrics);
  collector_.publish(std::move(metrics));
}

}  // namespace gpureap
