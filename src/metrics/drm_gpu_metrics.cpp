// The AMD and Intel GPUs read through DRM (src/drm) in the per-GPU families NVIDIA's fill, with
// vendor "amd" or "intel": a dashboard sums memory over all of a host's GPUs with one query.
// Only what sysfs and fdinfo tell is served; what they do not tell (utilisation, temperature,
// power, the driver's own process list) is absent, never zero.
#include <string>

#include "metrics/gpu_families.hpp"
#include "metrics/snapshot_metrics.hpp"

namespace gpureap {

void add_drm_gpu_metrics(const Snapshot& snapshot, GpuFamilies& families) {
  const auto& reading = snapshot.drm;
  for (const auto& device : reading.devices) {
    // The PCI address is the GPU's name here, as in gpureap ps: DRM has no NVML index and
    // sysfs no UUID. Addresses are checked on reading (canonical_pci_address), drivers are not.
    const std::string_view vendor = drm::gpu_vendor_name(device.vendor);
    const auto labels = [&] { return gpu_series_labels(device.pci_address, "", vendor); };
    auto info = labels();
    info.push_back({"name", ""});  // sysfs has no product name
    info.push_back({"pci_bus_id", device.pci_address});
    families.info.add(std::move(info), 1);
    families.lost.add({{"gpu", device.pci_address}, {"vendor", std::string(vendor)}}, 0);
    if (device.vram_total) families.total.add(labels(), static_cast<double>(*device.vram_total));
    if (!device.vram_used) continue;  // i915 and xe: no device figure to compare with
    const std::uint64_t used = *device.vram_used;
    families.used.add(labels(), static_cast<double>(used));
    if (device.vram_total && *device.vram_total >= used) {
      families.free.add(labels(), static_cast<double>(*device.vram_total - used));
    }
    // What no client accounts for, absent when some DRM descriptor's stats could not be read
    // (their memory may be the rest). Unlike doctor's finding, no allowance for the driver's own
    // use is taken off: the figure is the raw difference, as NVIDIA's is.
    if (reading.fdinfo_unread > 0) continue;
    const std::uint64_t explained = drm::explained_vram(reading, device.pci_address).total();
    families.unattributed.add(labels(), used > explained ? static_cast<double>(used - explained) : 0.0);
  }
}

}  // namespace gpureap
