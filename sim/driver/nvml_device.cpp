// Device enumeration and identity: count, handles, index, name, UUID, PCI info, minor number.
// Identity answers come from the configuration, so they work on a lost GPU too.
#include <cstring>

#include "driver/driver_state.hpp"

using namespace gpusim;
using namespace gpusim::driver;

// The pre-5.319 nvmlInit attached only GPUs it could open, so the plain GetCount and
// GetHandleByIndex skip GPUs without permission; the _v2 calls count them.
static std::vector<unsigned> visible_gpus(const Config& config, bool legacy_v1) {
  std::vector<unsigned> out;
  for (unsigned i = 0; i < config.gpus.size(); ++i) {
    if (!legacy_v1 || !config.gpus[i].no_permission) out.push_back(i);
  }
  return out;
}

static nvmlReturn_t get_count(const char* symbol, unsigned* deviceCount, bool legacy_v1) {
  return guarded([&] {
    Call call(symbol);
    if (call.rc() != NVML_SUCCESS) return call.rc();
    if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = static_cast<unsigned>(visible_gpus(call.config(), legacy_v1).size());
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) {
  return get_count("nvmlDeviceGetCount", deviceCount, true);
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  return get_count("nvmlDeviceGetCount_v2", deviceCount, false);
}

static nvmlReturn_t handle_by_index(const char* symbol, unsigned index, nvmlDevice_t* device,
                                    bool legacy_v1) {
  return guarded([&] {
    Call call(symbol);
    if (call.rc() != NVML_SUCCESS) return call.rc();
    if (device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    auto gpus = visible_gpus(call.config(), legacy_v1);
    if (index >= gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned gpu = gpus[index];
    if (auto code = call.gpu_fault(gpu)) return *code;
    if (call.config().gpus[gpu].no_permission) return NVML_ERROR_NO_PERMISSION;
    // A lost GPU still yields a handle; the queries on it fail.
    if (auto rc = call.attach_gpu(gpu)) return rc;
    *device = call.physical_handle(gpu);
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return handle_by_index("nvmlDeviceGetHandleByIndex", index, device, true);
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return handle_by_index("nvmlDeviceGetHandleByIndex_v2", index, device, false);
}

// Accepts a GPU UUID or a MIG device UUID.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  return guarded([&] {
    Call call("nvmlDeviceGetHandleByUUID");
    if (call.rc() != NVML_SUCCESS) return call.rc();
    if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& gpus = call.config().gpus;
    for (unsigned g = 0; g < gpus.size(); ++g) {
      nvmlDevice_t found = nullptr;
      if (gpus[g].uuid == uuid) found = call.physical_handle(g);
      if (gpus[g].mig_enabled) {
        for (unsigned m = 0; m < gpus[g].mig.size() && found == nullptr; ++m) {
          if (gpus[g].mig[m].uuid == uuid) found = call.mig_handle(g, m);
        }
      }
      if (found == nullptr) continue;
      if (auto code = call.gpu_fault(g)) return *code;
      if (gpus[g].no_permission) return NVML_ERROR_NO_PERMISSION;
      if (auto rc = call.attach_gpu(g)) return rc;
      *device = found;
      return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return on_device("nvmlDeviceGetIndex", device, OnLost::Allow, [&](Call&, const Target& t) {
    if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *index = t.gpu_index;
    return NVML_SUCCESS;
  });
}

// MIG devices are named after their parent and profile, e.g. "NVIDIA H100 80GB HBM3 MIG 2g.20gb".
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return on_device("nvmlDeviceGetName", device, OnLost::Allow, [&](Call&, const Target& t) {
    std::string n = t.is_mig() ? t.gpu->name + " " + t.mig->name : t.gpu->name;
    return copy_out(n, name, length);
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return on_device("nvmlDeviceGetUUID", device, OnLost::Allow, [&](Call&, const Target& t) {
    return copy_out(t.is_mig() ? t.mig->uuid : t.gpu->uuid, uuid, length);
  });
}

// MIG handles report their parent's PCI location.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return on_device("nvmlDeviceGetPciInfo_v3", device, OnLost::Allow, [&](Call&, const Target& t) {
    if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlPciInfo_t out{};
    std::string legacy = t.gpu->pci_bus_id_legacy();
    std::string bus_id = t.gpu->pci_bus_id();
    std::strncpy(out.busIdLegacy, legacy.c_str(), sizeof out.busIdLegacy - 1);
    std::strncpy(out.busId, bus_id.c_str(), sizeof out.busId - 1);
    out.domain = t.gpu->pci_domain;
    out.bus = t.gpu->pci_bus;
    out.device = t.gpu->pci_device;
    out.pciDeviceId = t.gpu->pci_device_id;
    out.pciSubSystemId = t.gpu->pci_subsystem_id;
    std::memcpy(pci, &out, sizeof out);
    return NVML_SUCCESS;
  });
}

// The old 52-byte layout: 16-byte bus id first, reserved words last. Writing the 68-byte
// struct here would overrun every caller that still uses _v2.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_v2_t* pci) {
  return on_device("nvmlDeviceGetPciInfo_v2", device, OnLost::Allow, [&](Call&, const Target& t) {
    if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlPciInfo_v2_t out{};
    std::string legacy = t.gpu->pci_bus_id_legacy();
    std::strncpy(out.busId, legacy.c_str(), sizeof out.busId - 1);
    out.domain = t.gpu->pci_domain;
    out.bus = t.gpu->pci_bus;
    out.device = t.gpu->pci_device;
    out.pciDeviceId = t.gpu->pci_device_id;
    out.pciSubSystemId = t.gpu->pci_subsystem_id;
    std::memcpy(pci, &out, sizeof out);
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber) {
  return on_device("nvmlDeviceGetMinorNumber", device, OnLost::Allow, [&](Call&, const Target& t) {
    if (minorNumber == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    *minorNumber = t.gpu->minor;
    return NVML_SUCCESS;
  });
}
