// The per-GPU families of docs/metrics.md ("Per GPU"), each created once with its type and help
// text, for the two sources that fill them: NVML's GPUs (gpu_metrics.cpp) and the AMD and Intel
// GPUs read through DRM (drm_gpu_metrics.cpp). Both fill the same names; the `vendor` label
// tells them apart. Internal to src/metrics.
#pragma once

#include <string>
#include <vector>

#include "metrics/metric_set.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

struct GpuFamilies {
  MetricFamily& info;
  MetricFamily& total;
  MetricFamily& used;
  MetricFamily& reserved;
  MetricFamily& free;
  MetricFamily& unattributed;
  MetricFamily& utilization;
  MetricFamily& temperature;
  MetricFamily& power;
  MetricFamily& processes;
  MetricFamily& holders;
  MetricFamily& lost;
  MetricFamily& orphaned;
  MetricFamily& orphaned_bytes;
};

GpuFamilies gpu_families(MetricSet& metrics);

// The labels every per-GPU series has but gpureap_gpu_lost's: gpu, uuid, vendor.
std::vector<MetricLabel> gpu_series_labels(std::string gpu, std::string uuid, std::string_view vendor);

// The DRM GPUs of the snapshot (AMD's and Intel's) in `families`: gpu is the PCI address, uuid
// empty, and only what sysfs and fdinfo tell (docs/metrics.md says which).
void add_drm_gpu_metrics(const Snapshot& snapshot, GpuFamilies& families);

}  // namespace gpureap
