// MIG: mode, device enumeration and the MIG-handle <-> parent relation.
// Slots 0..6 of a MIG-enabled GPU; slots without an instance answer NOT_FOUND, as on
// hardware where instances have been destroyed.
#include "driver/driver_state.hpp"

using namespace gpusim;
using namespace gpusim::driver;

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                               unsigned int* pendingMode) {
  return on_device("nvmlDeviceGetMigMode", device, [&](Call&, const Target& t) {
    if (currentMode == nullptr || pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    unsigned mode = t.gpu->mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    *currentMode = mode;
    *pendingMode = mode;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  return on_device("nvmlDeviceGetMaxMigDeviceCount", device, [&](Call&, const Target& t) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *count = t.gpu->mig_enabled ? kMaxMigSlots : 0;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                              nvmlDevice_t* migDevice) {
  return on_device("nvmlDeviceGetMigDeviceHandleByIndex", device, [&](Call& call, const Target& t) {
    if (migDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    if (!t.gpu->mig_enabled || index >= kMaxMigSlots) return NVML_ERROR_INVALID_ARGUMENT;
    if (index >= t.gpu->mig.size()) return NVML_ERROR_NOT_FOUND;
    if (auto rc = call.attach_gpu(t.gpu_index)) return rc;
    *migDevice = call.mig_handle(t.gpu_index, index);
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  return on_device("nvmlDeviceGetGpuInstanceId", device, [&](Call&, const Target& t) {
    if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *id = t.mig->gi;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  return on_device("nvmlDeviceGetComputeInstanceId", device, [&](Call&, const Target& t) {
    if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (!t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *id = t.mig->ci;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice) {
  return on_device("nvmlDeviceIsMigDeviceHandle", device, OnLost::Allow, [&](Call&, const Target& t) {
    if (isMigDevice == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *isMigDevice = t.is_mig() ? 1u : 0u;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                       nvmlDevice_t* device) {
  return on_device("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", migDevice, OnLost::Allow,
                   [&](Call& call, const Target& t) {
    if (device == nullptr || !t.is_mig()) return NVML_ERROR_INVALID_ARGUMENT;
    if (auto rc = call.attach_gpu(t.gpu_index)) return rc;
    *device = call.physical_handle(t.gpu_index);
    return NVML_SUCCESS;
  });
}
