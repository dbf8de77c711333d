#include "watch/host_check.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "drm/drm_reading.hpp"
#include "nvml/driver_reading.hpp"
#include "nvml/nvml_library.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

PolicyHostCheck check_policy_on_this_host(const Policy& policy) {
  PolicyHostCheck out;
  // AMD's and Intel's from sysfs, which needs no driver library.
  std::vector<std::string> pci_addresses;
  for (const auto& device : drm::read_gpu_devices(default_snapshot_options().sysfs_root)) {
    pci_addresses.push_back(device.pci_address);
  }
  out.problem = check_policy_drm_gpus(policy, pci_addresses);
  if (!out.problem.empty()) return out;
  NvmlLoadResult loaded = NvmlLibrary::load();
  if (!loaded.library) {
    out.note = "the GPUs the rules name were not checked: " + loaded.message;
    return out;
  }
  const DriverReading reading = read_driver(*loaded.library, DriverReadScope::Processes);
  if (reading.error) {
    out.note = "the GPUs the rules name were not checked: the driver could not count the GPUs";
    return out;
  }
  out.driver_read = true;
  std::map<unsigned, std::string> uuids;
  for (const auto& gpu : reading.gpus) {
    std::string uuid = gpu.uuid;
    std::transform(uuid.begin(), uuid.end(), uuid.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    uuids[gpu.index] = uuid;
  }
  out.problem = check_policy_gpus(policy, uuids);
  return out;
}

}  // namespace gpureap
