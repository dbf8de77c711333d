#include "nvml/driver_reading.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "nvml/nvml_library.hpp"
#include "nvml/process_records.hpp"

namespace gpureap {
namespace {

using nvml_abi::Device;

// Codes after which nothing more can be learned from the GPU.
bool gpu_is_unusable(int code) {
  return code == nvml_abi::kErrorGpuIsLost || code == 16 /* RESET_REQUIRED */ ||
         code == nvml_abi::kErrorUnknown || code == nvml_abi::kErrorUninitialized;
}

class GpuReader {
 public:
  GpuReader(const NvmlLibrary& lib, GpuReading& gpu, const GpuReading* previous)
      : lib_(lib), s_(lib.symbols()), gpu_(gpu), previous_(previous) {}

  void read(Device device, DriverReadScope scope) {
    read_identity(device);
    if (failed()) return;
    if (scope == DriverReadScope::Everything) {
      read_health(device);
      if (failed()) return;
      gpu_.memory = read_memory(device);
      if (failed()) return;
    }
    read_mig(device);
    if (failed()) return;
    read_processes(device);
    if (failed()) return;
    read_process_utilization(device);
  }

 private:
  bool failed() const { return gpu_.error.has_value(); }

  // Records the code; returns true on success. Fatal codes mark the whole GPU.
  bool check(int rc, const char* call) {
    if (rc == nvml_abi::kSuccess) return true;
    if (gpu_is_unusable(rc) && !gpu_.error) gpu_.error = NvmlError{rc, call, lib_.error_string(rc)};
    return false;
  }

  std::string read_string(nvml_abi::DeviceGetStringFn fn, Device device, unsigned size,
                          const char* call) {
    if (!fn) return {};
    std::string buffer(size, '\0');
    if (!check(fn(device, buffer.data(), size), call)) return {};
    buffer.resize(strnlen(buffer.data(), size));
    return buffer;
  }

  template <typename Fn>
  std::optional<unsigned> read_uint(Fn fn, Device device, const char* call) {
    if (!fn) return std::nullopt;
    unsigned value = 0;
    if (!check(fn(device, &value), call)) return std::nullopt;
    return value;
  }

  void read_identity(Device device) {
    gpu_.name = read_string(s_.device_get_name, device, nvml_abi::kNameBufferSize, "nvmlDeviceGetName");
    gpu_.uuid = read_string(s_.device_get_uuid, device, nvml_abi::kUuidBufferSize, "nvmlDeviceGetUUID");
    if (s_.device_get_pci_info) {
      nvml_abi::PciInfoV3 pci{};
      if (check(s_.device_get_pci_info(device, &pci), "nvmlDeviceGetPciInfo_v3")) {
        gpu_.pci_bus_id.assign(pci.busId, strnlen(pci.busId, sizeof(pci.busId)));
      }
    }
    gpu_.minor_number = read_uint(s_.device_get_minor_number, device, "nvmlDeviceGetMinorNumber");
  }

  void read_health(Device device) {
    if (s_.device_get_temperature) {
      unsigned temp = 0;
      if (check(s_.device_get_temperature(device, nvml_abi::kTemperatureGpu, &temp),
                "nvmlDeviceGetTemperature")) {
        gpu_.temperature_c = temp;
      }
    }
    gpu_.power_mw = read_uint(s_.device_get_power_usage, device, "nvmlDeviceGetPowerUsage");
    gpu_.power_limit_mw = read_uint(s_.device_get_power_limit, device, "nvmlDeviceGetEnforcedPowerLimit");
    gpu_.fan_percent = read_uint(s_.device_get_fan_speed, device, "nvmlDeviceGetFanSpeed");
    if (s_.device_get_performance_state) {
      int pstate = 0;
      // 32 is NVML_PSTATE_UNKNOWN: left unknown, like a call that failed.
      if (check(s_.device_get_performance_state(device, &pstate), "nvmlDeviceGetPerformanceState") && pstate >= 0 &&
          pstate <= 15) {
        gpu_.performance_state = static_cast<unsigned>(pstate);
      }
    }
    if (s_.device_get_persistence_mode) {
      int mode = 0;
      if (check(s_.device_get_persistence_mode(device, &mode), "nvmlDeviceGetPersistenceMode")) {
        gpu_.persistence_mode = mode == nvml_abi::kEnableStateEnabled;
      }
    }
    if (s_.device_get_utilization_rates) {
      nvml_abi::Utilization util{};
      if (check(s_.device_get_utilization_rates(device, &util), "nvmlDeviceGetUtilizationRates")) {
        gpu_.util_gpu_percent = util.gpu;
        gpu_.util_memory_percent = util.memory;
      }
    }
  }

  MemoryReading read_memory(Device device) {
    MemoryReading memory;
    if (s_.device_get_memory_info_v2) {
      nvml_abi::MemoryV2 v2{};
      v2.version = nvml_abi::kMemoryV2Version;
      if (check(s_.device_get_memory_info_v2(device, &v2), "nvmlDeviceGetMemoryInfo_v2") &&
          v2.total != 0) {  // integrated GPUs report total 0: no dedicated memory to account
        memory = {v2.total, v2.reserved, v2.free, v2.used, "v2"};
        return memory;
      }
      if (failed()) return memory;
    }
    if (s_.device_get_memory_info) {
      nvml_abi::MemoryV1 v1{};
      if (check(s_.device_get_memory_info(device, &v1), "nvmlDeviceGetMemoryInfo") && v1.total != 0) {
        memory.total = v1.total;
        memory.free = v1.free;
        memory.used = v1.used;
        memory.source = "v1";
      }
    }
    return memory;
  }

  void read_mig(Device device) {
    if (!s_.device_get_mig_mode) return;
    unsigned current = 0, pending = 0;
    if (!check(s_.device_get_mig_mode(device, &current, &pending), "nvmlDeviceGetMigMode")) return;
    gpu_.mig_enabled = current == nvml_abi::kMigEnable;
    if (!gpu_.mig_enabled || !s_.device_get_max_mig_device_count ||
        !s_.device_get_mig_device_handle_by_index) {
      return;
    }
    const auto max = read_uint(s_.device_get_max_mig_device_count, device, "nvmlDeviceGetMaxMigDeviceCount");
    for (unsigned i = 0; max && i < *max; ++i) {
      Device mig = nullptr;
      const int rc = s_.device_get_mig_device_handle_by_index(device, i, &mig);
      if (rc == nvml_abi::kErrorNotFound) continue;  // empty slot
      if (!check(rc, "nvmlDeviceGetMigDeviceHandleByIndex")) {
        if (failed()) return;
        continue;
      }
      MigDeviceReading reading;
      reading.gpu_instance_id =
          read_uint(s_.device_get_gpu_instance_id, mig, "nvmlDeviceGetGpuInstanceId").value_or(nvml_abi::kInvalidInstanceId);
      reading.compute_instance_id =
          read_uint(s_.device_get_compute_instance_id, mig, "nvmlDeviceGetComputeInstanceId").value_or(nvml_abi::kInvalidInstanceId);
      reading.name = read_string(s_.device_get_name, mig, nvml_abi::kNameBufferSize, "nvmlDeviceGetName");
      reading.uuid = read_string(s_.device_get_uuid, mig, nvml_abi::kUuidBufferSize, "nvmlDeviceGetUUID");
      reading.memory = read_memory(mig);
      if (failed()) return;
      gpu_.mig_devices.push_back(std::move(reading));
      mig_handles_.push_back(mig);
    }
  }

  void merge(const ProcessRecord& record, ProcessListKind kind,
             std::optional<unsigned> forced_gi = std::nullopt,
             std::optional<unsigned> forced_ci = std::nullopt) {
    const auto gi = forced_gi ? forced_gi : record.gpu_instance_id;
    const auto ci = forced_ci ? forced_ci : record.compute_instance_id;
    auto key = std::make_tuple(record.pid, gi.value_or(nvml_abi::kInvalidInstanceId),
                               ci.value_or(nvml_abi::kInvalidInstanceId));
    auto [it, inserted] = merged_.try_emplace(key);
    DriverProcess& process = it->second;
    if (inserted) {
      process.pid = record.pid;
      process.gpu_instance_id = gi;
      process.compute_instance_id = ci;
    }
    switch (kind) {
      case ProcessListKind::Compute: process.types.compute = true; break;
      case ProcessListKind::Graphics: process.types.graphics = true; break;
      case ProcessListKind::Mps: process.types.mps = true; break;
    }
    // A process in several lists is reported with its memory on the device in each; keep
    // the largest rather than adding, which would count it twice.
    if (record.used_memory) {
      process.used_memory = std::max(process.used_memory.value_or(0), *record.used_memory);
    }
  }

  // Returns the NVML code of the listing.
  int list_into(Device device, ProcessListKind kind, std::optional<unsigned> gi,
                std::optional<unsigned> ci) {
    const ProcessListSymbol& symbol = lib_.process_list(kind);
    const std::size_t stride = expected_record_stride(symbol.version, s_.has_conf_compute_mem_size_info,
                                                      s_.has_running_process_detail_list);
    // Sized from the last reading when there is one (only through the parent handle: MIG
    // instances list a share each).
    unsigned expected = 0;
    if (previous_ != nullptr && !gi) {
      for (const auto& p : previous_->processes) {
        const bool listed = kind == ProcessListKind::Compute    ? p.types.compute
                            : kind == ProcessListKind::Graphics ? p.types.graphics
                                                                : p.types.mps;
        expected += listed ? 1 : 0;
      }
    }
    ProcessListRead read = read_process_list(symbol.fn, device, stride, expected);
    if (!read.warning.empty()) gpu_.warnings.push_back(symbol.name + ": " + read.warning);
    if (read.code == nvml_abi::kSuccess) {
      for (const auto& record : read.records) merge(record, kind, gi, ci);
    }
    return read.code;
  }

  void read_processes(Device device) {
    for (auto kind : {ProcessListKind::Compute, ProcessListKind::Graphics, ProcessListKind::Mps}) {
      const ProcessListSymbol& symbol = lib_.process_list(kind);
      if (!symbol.fn) continue;
      int rc = list_into(device, kind, std::nullopt, std::nullopt);
      if (rc != nvml_abi::kSuccess && gpu_.mig_enabled && !mig_handles_.empty() &&
          rc != nvml_abi::kErrorNotSupported && !gpu_is_unusable(rc)) {
        // Aggregate listing through the parent handle needs privilege: ask each instance.
        rc = nvml_abi::kSuccess;
        for (std::size_t i = 0; i < mig_handles_.size(); ++i) {
          const int mig_rc = list_into(mig_handles_[i], kind, gpu_.mig_devices[i].gpu_instance_id,
                                       gpu_.mig_devices[i].compute_instance_id);
          if (mig_rc != nvml_abi::kSuccess) rc = mig_rc;
        }
      }
      if (rc == nvml_abi::kSuccess || rc == nvml_abi::kErrorNotSupported) continue;
      if (!check(rc, symbol.name.c_str()) && failed()) return;
      gpu_.processes_complete = false;
      gpu_.warnings.push_back(fmt::format("{} failed with {} ({}): the process list is incomplete",
                                          symbol.name, nvml_error_name(rc), lib_.error_string(rc)));
    }
    for (auto& [key, process] : merged_) gpu_.processes.push_back(process);
  }

  void read_process_utilization(Device device) {
    if (!s_.device_get_process_utilization || gpu_.mig_enabled || gpu_.processes.empty()) return;
    const auto now_us = static_cast<unsigned long long>(
        std::chrono::duration_cast<std::chrono::microseconds>(
            std::chrono::system_clock::now().time_since_epoch()).count());
    unsigned long long since = now_us > 2'000'000 ? now_us - 2'000'000 : 0;
    if (previous_ != nullptr && previous_->utilization_read_at_us > 0) since = std::min<unsigned long long>(since, previous_->utilization_read_at_us);
    gpu_.utilization_read_at_us = now_us;
    unsigned count = 0;
    // At most one sample per listed process: with a previous reading, no sizing call.
    int rc = nvml_abi::kErrorInsufficientSize;
    if (previous_ != nullptr) {
      count = static_cast<unsigned>(gpu_.processes.size());
    } else {
      rc = s_.device_get_process_utilization(device, nullptr, &count, since);
    }
    // NOT_FOUND: no process had a sample newer than `since`, so none was active.
    if (rc == nvml_abi::kErrorNotFound || (rc == nvml_abi::kSuccess && count == 0)) {
      gpu_.process_utilization_known = true;
      return;
    }
    if (rc != nvml_abi::kErrorInsufficientSize || count == 0) return;
    std::vector<nvml_abi::ProcessUtilizationSample> samples(std::size_t{count} * 2 + 5);
    count = static_cast<unsigned>(samples.size());
    rc = s_.device_get_process_utilization(device, samples.data(), &count, since);
    if (rc == nvml_abi::kErrorInsufficientSize && count > 0 && count <= 4096) {  // more samples than guessed
      samples.assign(std::size_t{count} * 2 + 5, {});
      count = static_cast<unsigned>(samples.size());
      rc = s_.device_get_process_utilization(device, samples.data(), &count, since);
    }
    if (rc == nvml_abi::kErrorNotFound) gpu_.process_utilization_known = true;
    if (rc != nvml_abi::kSuccess) return;
    gpu_.process_utilization_known = true;
    std::map<unsigned, nvml_abi::ProcessUtilizationSample> latest;
    for (unsigned i = 0; i < count && i < samples.size(); ++i) {
      const auto& sample = samples[i];
      if (sample.smUtil > 100 || sample.memUtil > 100) continue;  // garbage, as nvtop found
      auto& slot = latest[sample.pid];
      if (sample.timeStamp >= slot.timeStamp) slot = sample;
    }
    for (auto& process : gpu_.processes) {
      if (auto it = latest.find(process.pid); it != latest.end()) {
        process.sm_util_percent = it->second.smUtil;
        process.mem_util_percent = it->second.memUtil;
      }
    }
  }

  const NvmlLibrary& lib_;
  const NvmlSymbols& s_;
  GpuReading& gpu_;
  const GpuReading* previous_;  // the same GPU in the last reading, or null
  std::vector<Device> mig_handles_;
  std::map<std::tuple<unsigned, unsigned, unsigned>, DriverProcess> merged_;
};

std::string read_system_string(nvml_abi::SystemGetStringFn fn) {
  if (!fn) return {};
  char buffer[nvml_abi::kDriverVersionBufferSize] = {};
  if (fn(buffer, sizeof(buffer)) != nvml_abi::kSuccess) return {};
  return std::string(buffer, strnlen(buffer, sizeof(buffer)));
}

}  // namespace

std::string ProcessTypes::label() const {
  std::string out;
  auto add = [&out](bool on, const char* letter) {
    if (!on) return;
    if (!out.empty()) out += '+';
    out += letter;
  };
  add(compute, "C");
  add(graphics, "G");
  add(mps, "M");
  return out.empty() ? "?" : out;
}

DriverReading read_driver(const NvmlLibrary& library, DriverReadScope scope, const DriverReading* previous) {
  const NvmlSymbols& s = library.symbols();
  DriverReading reading;
  reading.library_path = library.path();
  reading.driver_version = read_system_string(s.system_get_driver_version);
  reading.nvml_version = read_system_string(s.system_get_nvml_version);
  if (s.system_get_cuda_driver_version) {
    int version = 0;
    if (s.system_get_cuda_driver_version(&version) == nvml_abi::kSuccess) reading.cuda_driver_version = version;
  }
  unsigned count = 0;
  if (const int rc = s.device_get_count(&count); rc != nvml_abi::kSuccess) {
    reading.error = NvmlError{rc, "nvmlDeviceGetCount", library.error_string(rc)};
    return reading;
  }
  for (unsigned index = 0; index < count; ++index) {
    GpuReading gpu;
    gpu.index = index;
    Device device = nullptr;
    if (const int rc = s.device_get_handle_by_index(index, &device); rc != nvml_abi::kSuccess) {
      gpu.error = NvmlError{rc, "nvmlDeviceGetHandleByIndex", library.error_string(rc)};
    } else {
      const GpuReading* before = nullptr;
      if (previous != nullptr) {
        for (const auto& g : previous->gpus) {
          if (g.index == index && !g.error && g.processes_complete) before = &g;
        }
      }
      GpuReader(library, gpu, before).read(device, scope);
    }
    reading.gpus.push_back(std::move(gpu));
  }
  return reading;
}

}  // namespace gpureap
