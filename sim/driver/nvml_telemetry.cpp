// Sensors and modes: utilization, temperature, power, persistence, compute mode.
// None of them is available through a MIG device handle except the compute mode, which with
// MIG on is only available through one.
#include <algorithm>

#include "driver/driver_state.hpp"

using namespace gpusim;
using namespace gpusim::driver;

// Device utilization = the configured baseline plus what the listed processes report.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                        nvmlUtilization_t* utilization) {
  return on_device("nvmlDeviceGetUtilizationRates", device, [&](Call& call, const Target& t) {
    if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig() || t.gpu->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
    auto views = call.scan(t.gpu_index);
    if (!views) return NVML_ERROR_UNKNOWN;
    unsigned gpu = t.gpu->util_gpu, mem = t.gpu->util_mem;
    std::vector<unsigned> seen;  // one contribution per process, not per allocation
    for (const auto& v : *views) {
      if (v.rec.gpu != t.gpu_index || !v.owner_running()) continue;
      if (std::find(seen.begin(), seen.end(), v.rec.owner_pid) != seen.end()) continue;
      seen.push_back(v.rec.owner_pid);
      gpu += v.rec.sm_util;
      mem += v.rec.mem_util;
    }
    utilization->gpu = std::min(gpu, 100u);
    utilization->memory = std::min(mem, 100u);
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                   nvmlTemperatureSensors_t sensorType,
                                                   unsigned int* temp) {
  return on_device("nvmlDeviceGetTemperature", device, [&](Call&, const Target& t) {
    if (temp == nullptr || sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *temp = t.gpu->temperature;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  return on_device("nvmlDeviceGetPowerUsage", device, [&](Call&, const Target& t) {
    if (power == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *power = t.gpu->power_mw;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
                                                       nvmlEnableState_t* mode) {
  return on_device("nvmlDeviceGetPersistenceMode", device, [&](Call&, const Target& t) {
    if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *mode = t.gpu->persistence ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t* mode) {
  return on_device("nvmlDeviceGetComputeMode", device, [&](Call&, const Target& t) {
    if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!t.is_mig() && t.gpu->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
    *mode = t.gpu->compute_mode;
    return NVML_SUCCESS;
  });
}
