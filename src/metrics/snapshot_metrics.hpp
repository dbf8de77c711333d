// The families of docs/metrics.md that one snapshot (and doctor's findings over it) gives:
// per GPU, driver and host, per user and container, per process (opt-in), doctor's findings.
// `watch` calls these on its own snapshots, so both serve the same series.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "doctor/finding.hpp"
#include "metrics/metric_set.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

struct SnapshotMetricsOptions {
  // gpureap_process_gpu_memory_bytes: one series per GPU process. Off by default: PIDs churn,
  // and the labels reveal users and command lines.
  bool per_process = false;
};

// gpureap_gpu_*: every GPU the driver lists, lost ones included (gpureap_gpu_lost 1).
void add_gpu_metrics(const Snapshot& snapshot, MetricSet& metrics);
// gpureap_driver_up, gpureap_driver_info, gpureap_build_info.
void add_driver_metrics(const Snapshot& snapshot, MetricSet& metrics);
// gpureap_user_gpu_memory_bytes, gpureap_container_gpu_memory_bytes, and with per_process
// gpureap_process_gpu_memory_bytes.
void add_owner_metrics(const Snapshot& snapshot, const SnapshotMetricsOptions& options, MetricSet& metrics);
// gpureap_doctor_finding: one series per (id, severity, gpu), its value the number of such
// findings (1 but for zombies and the like, which doctor reports one by one).
void add_finding_metrics(const std::vector<Finding>& findings, MetricSet& metrics);

void add_snapshot_metrics(const Snapshot& snapshot, const SnapshotMetricsOptions& options, MetricSet& metrics);

// Label values from outside gpureap (user, container, GPU name, command line) through the
// terminal's sanitiser: no control characters reach a dashboard or a log line. Commands are
// also cut to kCommandLabelColumns, as a terminal would show them.
inline constexpr std::size_t kCommandLabelColumns = 128;
std::string outside_label(std::string_view text);
std::string command_label(std::string_view command);

// "gpureap X.Y.Z" without the name: the version this binary was built as.
std::string_view gpureap_version();

}  // namespace gpureap
