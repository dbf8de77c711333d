#include "cli/watch_metrics.hpp"

#include <string>

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

void WatchMetricsPublisher::on_look(const Look& look) {
  if (look.snapshot) {
    MetricSet scanned;
    add_snapshot_metrics(*look.snapshot, options_, scanned);
    scanned_ = std::move(scanned);
  }
  MetricSet metrics = scanned_;
  add_watch_counter_metrics(counters_.read(), metrics);
  collector_.publish(std::move(metrics));
}

}  // namespace gpureap
