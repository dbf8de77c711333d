#include "smi/nvml_session.hpp"

#include <fmt/core.h>

namespace gpusim::smi {

namespace {
using InitFn = nvmlReturn_t();
using CountFn = nvmlReturn_t(unsigned*);
using HandleFn = nvmlReturn_t(unsigned, nvmlDevice_t*);
using StringFn = nvmlReturn_t(nvmlDevice_t, char*, unsigned);
using PciFn = nvmlReturn_t(nvmlDevice_t, nvmlPciInfo_t*);
}  // namespace

std::optional<NvmlSession> NvmlSession::open(int* exit_status) {
  auto nvml = NvmlClient::load(nvml_library_path());
  if (!nvml.ok()) {
    fmt::print("NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure "
               "that the NVIDIA Display Driver is properly installed and present in your system.\n"
               "Please also try adding directory that contains libnvidia-ml.so to your system PATH.\n");
    *exit_status = kExitLibraryNotFound;
    return std::nullopt;
  }
  auto* init = nvml->fn<InitFn>("nvmlInit_v2");
  nvmlReturn_t rc = init != nullptr ? init() : NVML_ERROR_FUNCTION_NOT_FOUND;
  if (rc == NVML_ERROR_DRIVER_NOT_LOADED) {
    fmt::print("{}\n", kDriverNotLoadedMessage);
  } else if (rc != NVML_SUCCESS) {
    fmt::print("Failed to initialize NVML: {}\n", nvml->error_string(rc));
  }
  if (rc != NVML_SUCCESS) {
    *exit_status = exit_status_for(rc);
    return std::nullopt;
  }
  return NvmlSession(std::move(*nvml));
}

NvmlSession::~NvmlSession() {
  if (!live_) return;
  if (auto* shutdown = nvml_.fn<InitFn>("nvmlShutdown")) shutdown();
}

std::optional<std::vector<SelectedGpu>> NvmlSession::select(const std::optional<std::string>& id,
                                                            int* exit_status) {
  std::vector<SelectedGpu> out;
  unsigned count = 0;
  auto* count_fn = fn<CountFn>("nvmlDeviceGetCount_v2");
  auto* handle_fn = fn<HandleFn>("nvmlDeviceGetHandleByIndex_v2");
  auto* uuid_fn = fn<StringFn>("nvmlDeviceGetUUID");
  auto* pci_fn = fn<PciFn>("nvmlDeviceGetPciInfo_v3");
  if (count_fn != nullptr && count_fn(&count) != NVML_SUCCESS) count = 0;
  for (unsigned i = 0; i < count && handle_fn != nullptr; ++i) {
    SelectedGpu g;
    g.index = i;
    if (handle_fn(i, &g.handle) != NVML_SUCCESS) continue;  // e.g. no permission: not shown
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (uuid_fn != nullptr && uuid_fn(g.handle, uuid, sizeof uuid) == NVML_SUCCESS) g.uuid = uuid;
    nvmlPciInfo_t pci{};
    if (pci_fn != nullptr && pci_fn(g.handle, &pci) == NVML_SUCCESS) g.bus_id = pci.busId;
    if (!id || id_matches(*id, i, g.uuid, g.bus_id)) out.push_back(std::move(g));
  }
  if (out.empty()) {
    fmt::print("No devices were found\n");
    *exit_status = kExitNotFound;
    return std::nullopt;
  }
  return out;
}

std::string NvmlSession::field_error(nvmlReturn_t rc) const {
  if (rc == NVML_ERROR_NOT_SUPPORTED) return "[N/A]";
  return "[" + nvml_.error_string(rc) + "]";
}

std::string mib(unsigned long long bytes, bool with_unit) {
  return fmt::format("{}{}", bytes >> 20, with_unit ? " MiB" : "");
}

}  // namespace gpusim::smi
