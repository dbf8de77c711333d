// Board telemetry that monitoring tools show beside memory: fan, performance state, power
// limits, ECC, video engine utilization, display and driver model. Signatures and return
// codes follow the doc comments of NVIDIA's nvml.h (nvidia-settings src/nvml.h, 450.51 to
// 610.43); values are an H100 SXM's unless `gpusim set` changes them (docs/simulator.md).
//
// Like temperature and power, none of these answers through a MIG device handle
// (NOT_SUPPORTED), the simulator's rule for physical sensors; a lost GPU answers GPU_IS_LOST.
#include <algorithm>

#include "driver/driver_state.hpp"

using namespace gpusim;
using namespace gpusim::driver;

// "NVML_ERROR_NOT_SUPPORTED if the device does not have a fan": SXM boards are cooled by the
// chassis and have none (fan_speed = -1, the default).
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* speed) {
  return on_device("nvmlDeviceGetFanSpeed", device, [&](Call&, const Target& t) {
    if (speed == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig() || t.gpu->fan_speed < 0) return NVML_ERROR_NOT_SUPPORTED;
    *speed = static_cast<unsigned>(t.gpu->fan_speed);
    return NVML_SUCCESS;
  });
}

// Without a configured pstate: P0 while any context lives on the GPU or it reports
// utilization, P8 when it is idle (not measured here).
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t* pState) {
  return on_device("nvmlDeviceGetPerformanceState", device, [&](Call& call, const Target& t) {
    if (pState == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    if (t.gpu->pstate >= 0) {
      *pState = t.gpu->pstate;
      return NVML_SUCCESS;
    }
    auto views = call.scan(t.gpu_index);
    if (!views) return NVML_ERROR_UNKNOWN;
    bool busy = t.gpu->util_gpu > 0 || std::any_of(views->begin(), views->end(), [&](const AllocView& v) {
                  return v.rec.gpu == t.gpu_index && v.listed();
                });
    *pState = busy ? NVML_PSTATE_0 : NVML_PSTATE_8;
    return NVML_SUCCESS;
  });
}

// Milliwatts, like the power usage.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int* limit) {
  return on_device("nvmlDeviceGetPowerManagementLimit", device, [&](Call&, const Target& t) {
    if (limit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *limit = t.gpu->power_limit_mw;
    return NVML_SUCCESS;
  });
}

// "the effective power limit that the driver enforces after taking into account all
// limiters": the lower of the management limit and any other limiter.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit) {
  return on_device("nvmlDeviceGetEnforcedPowerLimit", device, [&](Call&, const Target& t) {
    if (limit == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    unsigned other = t.gpu->enforced_power_limit_mw;
    *limit = other == 0 ? t.gpu->power_limit_mw : std::min(other, t.gpu->power_limit_mw);
    return NVML_SUCCESS;
  });
}

// "INVALID_ARGUMENT if device is invalid or either current or pending is NULL". No pending
// change is simulated: pending = current.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current,
                                               nvmlEnableState_t* pending) {
  return on_device("nvmlDeviceGetEccMode", device, [&](Call&, const Target& t) {
    if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = t.gpu->ecc ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}

// "Requires ECC Mode to be enabled": NOT_SUPPORTED with ECC off (the code a real driver
// returns then is not verified). "INVALID_ARGUMENT if device, errorType or counterType is
// invalid, or eccCounts is NULL". The configured counts serve as both volatile and aggregate.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                      nvmlEccCounterType_t counterType,
                                                      unsigned long long* eccCounts) {
  return on_device("nvmlDeviceGetTotalEccErrors", device, [&](Call&, const Target& t) {
    if (eccCounts == nullptr || errorType < 0 || errorType >= NVML_MEMORY_ERROR_TYPE_COUNT ||
        counterType < 0 || counterType >= NVML_ECC_COUNTER_TYPE_COUNT) {
      return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (t.is_mig() || !t.gpu->ecc) return NVML_ERROR_NOT_SUPPORTED;
    *eccCounts = errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED ? t.gpu->ecc_corrected : t.gpu->ecc_uncorrected;
    return NVML_SUCCESS;
  });
}

// NVML's reference: "Each sample period may be between 1 second and 1/6 second, depending on
// the product". The simulator reports 1/6 s; what an H100 reports was not measured.
static constexpr unsigned kVideoSamplingPeriodUs = 166667;

// "On MIG-enabled GPUs, querying encoder/decoder utilization is not currently supported";
// "INVALID_ARGUMENT if device is invalid, utilization is NULL, or samplingPeriodUs is NULL".
template <unsigned Gpu::*Field>
static nvmlReturn_t video_utilization(const char* symbol, nvmlDevice_t device, unsigned* utilization,
                                      unsigned* samplingPeriodUs) {
  return on_device(symbol, device, [&](Call&, const Target& t) {
    if (utilization == nullptr || samplingPeriodUs == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig() || t.gpu->mig_enabled) return NVML_ERROR_NOT_SUPPORTED;
    *utilization = std::min(t.gpu->*Field, 100u);
    *samplingPeriodUs = kVideoSamplingPeriodUs;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                                          unsigned int* samplingPeriodUs) {
  return video_utilization<&Gpu::util_enc>("nvmlDeviceGetEncoderUtilization", device, utilization,
                                           samplingPeriodUs);
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                                          unsigned int* samplingPeriodUs) {
  return video_utilization<&Gpu::util_dec>("nvmlDeviceGetDecoderUtilization", device, utilization,
                                           samplingPeriodUs);
}

// "For all products": whether a display (an X server's screen) is initialized on the GPU.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t* isActive) {
  return on_device("nvmlDeviceGetDisplayActive", device, [&](Call&, const Target& t) {
    if (isActive == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *isActive = t.gpu->display_active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}

// "For windows only" ... "NVML_ERROR_NOT_SUPPORTED if the platform is not windows";
// "INVALID_ARGUMENT if device is invalid or both current and pending are NULL" (450.51 to
// 610.43). Which check a real Linux library makes first is not verified.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t device, nvmlDriverModel_t* current,
                                                   nvmlDriverModel_t* pending) {
  return on_device("nvmlDeviceGetDriverModel", device, [&](Call&, const Target&) {
    if (current == nullptr && pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_ERROR_NOT_SUPPORTED;
  });
}
