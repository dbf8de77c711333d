// doctor's findings as gauges (docs/metrics.md, "Findings and kernel events").
#include <map>
#include <string>
#include <tuple>

#include "metrics/snapshot_metrics.hpp"

namespace gpureap {

void add_finding_metrics(const std::vector<Finding>& findings, MetricSet& metrics) {
  auto& family = metrics.family("gpureap_doctor_finding", MetricType::Gauge,
                                "doctor's findings present now, by kind, severity and GPU (how many of each).");
  // Zombies and D-state processes are one finding each: the same labels must be one series.
  std::map<std::tuple<std::string_view, std::string_view, std::string>, int> counts;
  for (const Finding& f : findings) {
    ++counts[{finding_id_name(f.id), severity_name(f.severity), finding_gpu_label(f)}];
  }
  for (const auto& [key, count] : counts) {
    const auto& [id, severity, gpu] = key;
    family.add({{"id", std::string(id)}, {"severity", std::string(severity)}, {"gpu", gpu}}, count);
  }
}

}  // namespace gpureap
