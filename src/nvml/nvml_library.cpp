#include "nvml/nvml_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <initializer_list>

#include <fmt/format.h>

#include "nvml/nvml_errors.hpp"

namespace gpureap {
namespace {

constexpr const char* kSoname = "libnvidia-ml.so.1";

template <typename Fn>
Fn resolve(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

// Newest versioned name first: the plain names keep their old semantics.
template <typename Fn>
Fn resolve_first(void* handle, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (auto fn = resolve<Fn>(handle, name)) return fn;
  }
  return nullptr;
}

ProcessListSymbol resolve_process_list(void* handle, const std::string& base) {
  for (int version : {3, 2, 1}) {
    std::string name = version == 1 ? base : fmt::format("{}_v{}", base, version);
    if (auto fn = resolve<nvml_abi::DeviceGetRunningProcessesFn>(handle, name.c_str())) {
      return {fn, name, version};
    }
  }
  return {};
}

std::string loaded_path(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0') {
    return map->l_name;
  }
  return fallback;
}

// Why dlopen failed, with what to set when it was our default soname.
std::string not_loaded_message(const std::string& path_or_soname, const char* why) {
  if (path_or_soname == kSoname) {
    return fmt::format(
        "{} not found: no NVIDIA driver on this host, or not in the loader path "
        "(set LD_LIBRARY_PATH or GPUREAP_NVML_LIBRARY=/path/to/libnvidia-ml.so.1)",
        kSoname);
  }
  return fmt::format("cannot load NVML library '{}' (from GPUREAP_NVML_LIBRARY): {}", path_or_soname,
                     why != nullptr ? why : "unknown error");
}

// The symbols without which the library is of no use. True when all are there.
bool resolve_required(void* handle, NvmlSymbols& s) {
  using namespace nvml_abi;
  s.init = resolve_first<InitFn>(handle, {"nvmlInit_v2", "nvmlInit"});
  s.shutdown = resolve<ShutdownFn>(handle, "nvmlShutdown");
  s.device_get_count = resolve_first<DeviceGetCountFn>(handle, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  s.device_get_handle_by_index = resolve_first<DeviceGetHandleByIndexFn>(
      handle, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  return s.init && s.shutdown && s.device_get_count && s.device_get_handle_by_index;
}

// The symbols an older driver may lack: each is checked where it is used.
void resolve_optional(void* handle, NvmlSymbols& s) {
  using namespace nvml_abi;
  s.error_string = resolve<ErrorStringFn>(handle, "nvmlErrorString");
  s.system_get_driver_version = resolve<SystemGetStringFn>(handle, "nvmlSystemGetDriverVersion");
  s.system_get_nvml_version = resolve<SystemGetStringFn>(handle, "nvmlSystemGetNVMLVersion");
  s.system_get_cuda_driver_version = resolve_first<SystemGetCudaDriverVersionFn>(
      handle, {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  s.device_get_name = resolve<DeviceGetStringFn>(handle, "nvmlDeviceGetName");
  s.device_get_uuid = resolve<DeviceGetStringFn>(handle, "nvmlDeviceGetUUID");
  s.device_get_pci_info = resolve<DeviceGetPciInfoFn>(handle, "nvmlDeviceGetPciInfo_v3");
  s.device_get_minor_number = resolve<DeviceGetUintFn>(handle, "nvmlDeviceGetMinorNumber");
  s.device_get_memory_info = resolve<DeviceGetMemoryInfoFn>(handle, "nvmlDeviceGetMemoryInfo");
  s.device_get_memory_info_v2 = resolve<DeviceGetMemoryInfoV2Fn>(handle, "nvmlDeviceGetMemoryInfo_v2");
  s.device_get_utilization_rates =
      resolve<DeviceGetUtilizationRatesFn>(handle, "nvmlDeviceGetUtilizationRates");
  s.device_get_temperature = resolve<DeviceGetTemperatureFn>(handle, "nvmlDeviceGetTemperature");
  s.device_get_power_usage = resolve<DeviceGetUintFn>(handle, "nvmlDeviceGetPowerUsage");
  s.device_get_persistence_mode = resolve<DeviceGetIntEnumFn>(handle, "nvmlDeviceGetPersistenceMode");
  s.device_get_fan_speed = resolve<DeviceGetUintFn>(handle, "nvmlDeviceGetFanSpeed");
  s.device_get_performance_state = resolve<DeviceGetIntEnumFn>(handle, "nvmlDeviceGetPerformanceState");
  s.device_get_power_limit = resolve<DeviceGetUintFn>(handle, "nvmlDeviceGetEnforcedPowerLimit");
  s.device_get_process_utilization =
      resolve<DeviceGetProcessUtilizationFn>(handle, "nvmlDeviceGetProcessUtilization");
  s.device_get_mig_mode = resolve<DeviceGetMigModeFn>(handle, "nvmlDeviceGetMigMode");
  s.device_get_max_mig_device_count = resolve<DeviceGetUintFn>(handle, "nvmlDeviceGetMaxMigDeviceCount");
  s.device_get_mig_device_handle_by_index =
      resolve<DeviceGetMigDeviceHandleByIndexFn>(handle, "nvmlDeviceGetMigDeviceHandleByIndex");
  s.device_get_gpu_instance_id = resolve<DeviceGetUintFn>(handle, "nvmlDeviceGetGpuInstanceId");
  s.device_get_compute_instance_id = resolve<DeviceGetUintFn>(handle, "nvmlDeviceGetComputeInstanceId");
  s.has_conf_compute_mem_size_info = dlsym(handle, "nvmlDeviceGetConfComputeMemSizeInfo") != nullptr;
  s.has_running_process_detail_list = dlsym(handle, "nvmlDeviceGetRunningProcessDetailList") != nullptr;
}

// What to check when nvmlInit fails with `rc`.
std::string init_failure_advice(int rc) {
  switch (rc) {
    case nvml_abi::kErrorDriverNotLoaded:
      return "the NVIDIA kernel module is not loaded (check `lsmod | grep nvidia`, dmesg)";
    case nvml_abi::kErrorLibRmVersionMismatch:
      return "the driver library and kernel module versions differ: usually a driver upgrade "
             "without a module reload or reboot";
    case nvml_abi::kErrorNoPermission:
      return "no permission to open the GPU device files (check /dev/nvidia* permissions)";
    default:
      return "the driver is not usable right now";
  }
}

}  // namespace

NvmlLoadResult NvmlLibrary::load() {
  const char* override_path = std::getenv("GPUREAP_NVML_LIBRARY");
  if (override_path != nullptr && override_path[0] != '\0') return load_from(override_path);
  return load_from(kSoname);
}

NvmlLoadResult NvmlLibrary::load_from(const std::string& path_or_soname) {
  NvmlLoadResult result;
  result.requested = path_or_soname;
  void* handle = dlopen(path_or_soname.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    result.failure = LoadFailure::LibraryNotFound;
    result.message = not_loaded_message(path_or_soname, why);
    return result;
  }

  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  lib->handle_ = handle;
  lib->path_ = loaded_path(handle, path_or_soname);
  NvmlSymbols& s = lib->symbols_;
  if (!resolve_required(handle, s)) {
    result.failure = LoadFailure::MissingSymbols;
    result.message = fmt::format(
        "{} lacks nvmlInit/nvmlShutdown/nvmlDeviceGetCount/nvmlDeviceGetHandleByIndex: "
        "not a usable NVML library",
        lib->path_);
    return result;  // lib's destructor dlcloses; initialized_ is false so no shutdown
  }
  resolve_optional(handle, s);
  lib->compute_ = resolve_process_list(handle, "nvmlDeviceGetComputeRunningProcesses");
  lib->graphics_ = resolve_process_list(handle, "nvmlDeviceGetGraphicsRunningProcesses");
  lib->mps_ = resolve_process_list(handle, "nvmlDeviceGetMPSComputeRunningProcesses");

  const int rc = s.init();
  if (rc != nvml_abi::kSuccess) {
    result.failure = LoadFailure::InitFailed;
    result.nvml_code = rc;
    result.message = fmt::format("NVML initialisation failed with {} ({}) from {}: {}", nvml_error_name(rc),
                                 lib->error_string(rc), lib->path_, init_failure_advice(rc));
    return result;
  }
  lib->initialized_ = true;
  result.library = std::move(lib);
  return result;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialized_ && symbols_.shutdown) symbols_.shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

const ProcessListSymbol& NvmlLibrary::process_list(ProcessListKind kind) const {
  switch (kind) {
    case ProcessListKind::Compute: return compute_;
    case ProcessListKind::Graphics: return graphics_;
    case ProcessListKind::Mps: return mps_;
  }
  return compute_;
}

std::string NvmlLibrary::error_string(int code) const {
  if (symbols_.error_string) {
    if (const char* text = symbols_.error_string(code); text != nullptr && text[0] != '\0') {
      return text;
    }
  }
  return nvml_error_name(code);
}

}  // namespace gpureap
