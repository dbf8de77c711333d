#include "watch/host_check.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "nvml/driver_reading.hpp"
#include "nvml/nvml_library.hpp"

namespace gpureap {

PolicyHostCheck check_policy_on_this_host(const Policy& policy) {
  PolicyHostCheck out;
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
