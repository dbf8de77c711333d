// Per GPU, driver and host families (docs/metrics.md, "Per GPU" and "Driver and host").
#include <array>
#include <optional>
#include <set>
#include <string>

#include "metrics/gpu_families.hpp"
#include "metrics/snapshot_metrics.hpp"

namespace gpureap {
namespace {

constexpr std::array kHolderRoles = {HolderRole::GpuProcess, HolderRole::Worker, HolderRole::Orphan,
                                     HolderRole::Client, HolderRole::Unlisted};

// NVML's GPUs are NVIDIA's.
constexpr std::string_view kNvidia = "nvidia";

std::vector<MetricLabel> gpu_labels(const GpuView& gpu) {
  return gpu_series_labels(std::to_string(gpu.reading.index), outside_label(gpu.reading.uuid), kNvidia);
}

void add_if_known(MetricFamily& family, const GpuView& gpu, const std::optional<double>& value) {
  if (value) family.add(gpu_labels(gpu), *value);
}

template <typename T>
std::optional<double> as_double(const std::optional<T>& value, double scale = 1) {
  if (!value) return std::nullopt;
  return static_cast<double>(*value) * scale;
}

// Memory the driver lists under exited PIDs whose contexts orphans keep alive.
double orphaned_memory(const Snapshot& snapshot, unsigned gpu, const std::set<pid_t>& orphans) {
  double bytes = 0;
  for (const auto& p : snapshot.processes) {
    if (p.gpu_index != gpu || !p.driver.used_memory) continue;
    const bool kept_by_orphan = std::any_of(p.held_by.begin(), p.held_by.end(),
                                            [&](pid_t holder) { return orphans.count(holder) > 0; });
    if (kept_by_orphan) bytes += static_cast<double>(*p.driver.used_memory);
  }
  return bytes;
}

}  // namespace

std::vector<MetricLabel> gpu_series_labels(std::string gpu, std::string uuid, std::string_view vendor) {
  return {{"gpu", std::move(gpu)}, {"uuid", std::move(uuid)}, {"vendor", std::string(vendor)}};
}

GpuFamilies gpu_families(MetricSet& metrics) {
  return GpuFamilies{
      .info = metrics.family("gpureap_gpu_info", MetricType::Gauge, "A GPU the driver lists (always 1)."),
      .total = metrics.family("gpureap_gpu_memory_total_bytes", MetricType::Gauge, "GPU memory in all."),
      .used = metrics.family("gpureap_gpu_memory_used_bytes", MetricType::Gauge,
                             "GPU memory in use as the driver reports it (v2 drivers: without the reservation)."),
      .reserved = metrics.family("gpureap_gpu_memory_reserved_bytes", MetricType::Gauge,
                                 "GPU memory the driver reserves for itself (v2 drivers only)."),
      .free = metrics.family("gpureap_gpu_memory_free_bytes", MetricType::Gauge, "GPU memory free."),
      .unattributed = metrics.family("gpureap_gpu_memory_unattributed_bytes", MetricType::Gauge,
                                     "Used GPU memory that the processes the driver lists do not account for."),
      .utilization = metrics.family("gpureap_gpu_utilization_ratio", MetricType::Gauge,
                                    "Share of time a kernel ran on the GPU (SM utilization), 0 to 1."),
      .temperature = metrics.family("gpureap_gpu_temperature_celsius", MetricType::Gauge, "GPU temperature."),
      .power = metrics.family("gpureap_gpu_power_watts", MetricType::Gauge, "GPU power draw."),
      .processes = metrics.family("gpureap_gpu_processes", MetricType::Gauge, "Processes the driver lists on the GPU."),
      .holders = metrics.family("gpureap_gpu_holders", MetricType::Gauge,
                                "Processes holding the GPU's device file, by their role."),
      .lost = metrics.family("gpureap_gpu_lost", MetricType::Gauge,
                             "1 when the driver says the GPU is lost or it could not be read."),
      .orphaned = metrics.family("gpureap_gpu_orphaned_holders", MetricType::Gauge,
                                 "Holders of the GPU whose job is provably over (orphans)."),
      .orphaned_bytes = metrics.family("gpureap_gpu_orphaned_memory_bytes", MetricType::Gauge,
                                       "GPU memory listed under exited processes whose contexts orphans keep alive."),
  };
}

void add_gpu_metrics(const Snapshot& snapshot, MetricSet& metrics) {
  GpuFamilies families = gpu_families(metrics);
  auto& [info, total, used, reserved, free, unattributed, utilization, temperature, power, processes, holders, lost,
         orphaned, orphaned_bytes] = families;

  std::set<pid_t> orphans;
  for (const auto& h : snapshot.holders) {
    if (h.role == HolderRole::Orphan) orphans.insert(h.pid);
  }
  for (const GpuView& gpu : snapshot.gpus) {
    const GpuReading& r = gpu.reading;
    const std::string index = std::to_string(r.index);
    auto info_labels = gpu_labels(gpu);
    info_labels.push_back({"name", outside_label(r.name)});
    info_labels.push_back({"pci_bus_id", outside_label(r.pci_bus_id)});
    info.add(std::move(info_labels), 1);
    lost.add({{"gpu", index}, {"vendor", std::string(kNvidia)}}, r.error ? 1 : 0);
    if (r.error) continue;  // nothing else it says can be believed
    add_if_known(total, gpu, as_double(gpu.memory.total));
    add_if_known(used, gpu, as_double(gpu.memory.used));
    add_if_known(reserved, gpu, as_double(gpu.memory.reserved));
    add_if_known(free, gpu, as_double(gpu.memory.free));
    add_if_known(unattributed, gpu, as_double(gpu.memory.unattributed));
    add_if_known(utilization, gpu, as_double(r.util_gpu_percent, 0.01));
    add_if_known(temperature, gpu, as_double(r.temperature_c));
    add_if_known(power, gpu, as_double(r.power_mw, 0.001));
    if (r.processes_complete) processes.add(gpu_labels(gpu), static_cast<double>(r.processes.size()));
    std::size_t orphan_count = 0;
    for (const HolderRole role : kHolderRoles) {
      std::size_t count = 0;
      for (const auto& h : snapshot.holders) {
        if (h.role == role && h.holds_gpu(r.index)) ++count;
      }
      if (role == HolderRole::Orphan) orphan_count = count;
      auto labels = gpu_labels(gpu);
      labels.push_back({"role", std::string(holder_role_name(role))});
      holders.add(std::move(labels), static_cast<double>(count));
    }
    orphaned.add(gpu_labels(gpu), static_cast<double>(orphan_count));
    orphaned_bytes.add(gpu_labels(gpu), orphaned_memory(snapshot, r.index, orphans));
  }
  add_drm_gpu_metrics(snapshot, families);
}

void add_driver_metrics(const Snapshot& snapshot, MetricSet& metrics) {
  metrics.family("gpureap_driver_up", MetricType::Gauge, "1 when the NVML library loaded and initialised.")
      .add(snapshot.driver.loaded ? 1 : 0);
  auto& driver_info = metrics.family("gpureap_driver_info", MetricType::Gauge,
                                     "The driver's and NVML's versions (always 1).");
  if (snapshot.driver.loaded) {
    driver_info.add({{"driver_version", outside_label(snapshot.driver.driver_version)},
                     {"nvml_version", outside_label(snapshot.driver.nvml_version)}},
                    1);
  }
  metrics.family("gpureap_build_info", MetricType::Gauge, "The gpureap version serving these metrics (always 1).")
      .add({{"version", std::string(gpureap_version())}}, 1);
}

void add_snapshot_metrics(const Snapshot& snapshot, const SnapshotMetricsOptions& options, MetricSet& metrics) {
  add_gpu_metrics(snapshot, metrics);
  add_driver_metrics(snapshot, metrics);
  add_owner_metrics(snapshot, options, metrics);
}

}  // namespace gpureap
