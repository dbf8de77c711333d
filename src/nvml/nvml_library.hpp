// Loads libnvidia-ml.so.1 with dlopen and resolves the symbols gpureap uses.
// Required symbols missing = the library is unusable; optional ones are null and every
// caller checks before use (what the driver lacks is shown as unknown, never as 0).
#pragma once

#include <memory>
#include <string>

#include "nvml/nvml_abi.hpp"

namespace gpureap {

struct NvmlSymbols {
  // Required.
  nvml_abi::InitFn init = nullptr;  // nvmlInit_v2, else plain nvmlInit
  nvml_abi::ShutdownFn shutdown = nullptr;
  nvml_abi::DeviceGetCountFn device_get_count = nullptr;                 // _v2, else plain
  nvml_abi::DeviceGetHandleByIndexFn device_get_handle_by_index = nullptr;  // _v2, else plain
  // Optional.
  nvml_abi::ErrorStringFn error_string = nullptr;
  nvml_abi::SystemGetStringFn system_get_driver_version = nullptr;
  nvml_abi::SystemGetStringFn system_get_nvml_version = nullptr;
  nvml_abi::SystemGetCudaDriverVersionFn system_get_cuda_driver_version = nullptr;
  nvml_abi::DeviceGetStringFn device_get_name = nullptr;
  nvml_abi::DeviceGetStringFn device_get_uuid = nullptr;
  nvml_abi::DeviceGetPciInfoFn device_get_pci_info = nullptr;  // _v3 only: older layouts differ
  nvml_abi::DeviceGetUintFn device_get_minor_number = nullptr;
  nvml_abi::DeviceGetMemoryInfoFn device_get_memory_info = nullptr;
  nvml_abi::DeviceGetMemoryInfoV2Fn device_get_memory_info_v2 = nullptr;
  nvml_abi::DeviceGetUtilizationRatesFn device_get_utilization_rates = nullptr;
  nvml_abi::DeviceGetTemperatureFn device_get_temperature = nullptr;
  nvml_abi::DeviceGetUintFn device_get_power_usage = nullptr;
  nvml_abi::DeviceGetIntEnumFn device_get_persistence_mode = nullptr;
  // Board telemetry `top` shows: NOT_SUPPORTED is the usual answer on chassis-cooled boards.
  nvml_abi::DeviceGetUintFn device_get_fan_speed = nullptr;
  nvml_abi::DeviceGetIntEnumFn device_get_performance_state = nullptr;
  nvml_abi::DeviceGetUintFn device_get_power_limit = nullptr;  // the enforced limit
  nvml_abi::DeviceGetProcessUtilizationFn device_get_process_utilization = nullptr;
  nvml_abi::DeviceGetMigModeFn device_get_mig_mode = nullptr;
  nvml_abi::DeviceGetUintFn device_get_max_mig_device_count = nullptr;
  nvml_abi::DeviceGetMigDeviceHandleByIndexFn device_get_mig_device_handle_by_index = nullptr;
  nvml_abi::DeviceGetUintFn device_get_gpu_instance_id = nullptr;
  nvml_abi::DeviceGetUintFn device_get_compute_instance_id = nullptr;
  // Present only to choose the process-record stride (see process_records.hpp).
  bool has_conf_compute_mem_size_info = false;
  bool has_running_process_detail_list = false;
};

// The three process lists, each resolved to the newest symbol the library exports.
enum class ProcessListKind { Compute, Graphics, Mps };

struct ProcessListSymbol {
  nvml_abi::DeviceGetRunningProcessesFn fn = nullptr;
  std::string name;  // e.g. "nvmlDeviceGetComputeRunningProcesses_v3"
  int version = 0;   // 1 (plain), 2 or 3
};

enum class LoadFailure { None, LibraryNotFound, MissingSymbols, InitFailed };

class NvmlLibrary;

struct NvmlLoadResult {
  std::unique_ptr<NvmlLibrary> library;  // set on success
  LoadFailure failure = LoadFailure::None;
  int nvml_code = 0;        // for InitFailed: what nvmlInit returned
  std::string requested;    // what we asked dlopen for
  std::string message;      // one line for a person: what happened and what to do
};

class NvmlLibrary {
 public:
  // dlopen(GPUREAP_NVML_LIBRARY) when set, else dlopen("libnvidia-ml.so.1") by soname so that
  // LD_LIBRARY_PATH works as for any NVML client; then resolves symbols and calls nvmlInit.
  static NvmlLoadResult load();
  static NvmlLoadResult load_from(const std::string& path_or_soname);

  ~NvmlLibrary();  // nvmlShutdown, then dlclose
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const NvmlSymbols& symbols() const { return symbols_; }
  const ProcessListSymbol& process_list(ProcessListKind kind) const;
  const std::string& path() const { return path_; }  // file actually loaded
  std::string error_string(int code) const;

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  bool initialized_ = false;
  std::string path_;
  NvmlSymbols symbols_;
  ProcessListSymbol compute_, graphics_, mps_;
};

}  // namespace gpureap
