// Initialization, error strings and system-wide queries.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "common/file_io.hpp"
#include "driver/driver_state.hpp"
#include "driver/generation.hpp"

using namespace gpusim;
using namespace gpusim::driver;

GPUSIM_EXPORT nvmlReturn_t nvmlInit(void) {
  return guarded([] { return driver_init("nvmlInit", 0, /*legacy_v1=*/true); });
}

GPUSIM_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  return guarded([] { return driver_init("nvmlInit_v2", 0, false); });
}

GPUSIM_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
  return guarded([&] { return driver_init("nvmlInitWithFlags", flags, false); });
}

GPUSIM_EXPORT nvmlReturn_t nvmlShutdown(void) {
  return guarded([] {
    {
      Call call("nvmlShutdown");
      if (call.rc() != NVML_SUCCESS) return call.rc();
    }
    return driver_shutdown();
  });
}

GPUSIM_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
      return "The requested vgpu operation is not available on target device, because ECC is enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "Not Ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
  }
}

GPUSIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return guarded([&] {
    Call call("nvmlSystemGetDriverVersion");
    if (call.rc() != NVML_SUCCESS) return call.rc();
    return copy_out(kGeneration.driver_version, version, length);
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return guarded([&] {
    Call call("nvmlSystemGetNVMLVersion");
    if (call.rc() != NVML_SUCCESS) return call.rc();
    return copy_out(std::to_string(kGeneration.nvml_major) + "." + kGeneration.driver_version,
                    version, length);
  });
}

static nvmlReturn_t cuda_driver_version(const char* symbol, int* cudaDriverVersion) {
  return guarded([&] {
    Call call(symbol);
    if (call.rc() != NVML_SUCCESS) return call.rc();
    if (cudaDriverVersion == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = kGeneration.cuda_version;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  return cuda_driver_version("nvmlSystemGetCudaDriverVersion", cudaDriverVersion);
}

GPUSIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
  return cuda_driver_version("nvmlSystemGetCudaDriverVersion_v2", cudaDriverVersion);
}

// The driver knows processes by host PID; it reports the executable path the process was
// started with (argv[0], as nvidia-smi shows it), or the kernel's comm when that is empty.
GPUSIM_EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name,
                                                    unsigned int length) {
  return guarded([&] {
    Call call("nvmlSystemGetProcessName");
    if (call.rc() != NVML_SUCCESS) return call.rc();
    if (name == nullptr || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (pid == 0) return NVML_ERROR_NOT_FOUND;
    std::string base = "/proc/" + std::to_string(pid);
    ReadResult cmd = read_file(base + "/cmdline");
    if (!cmd.ok()) {
      return cmd.error.missing ? NVML_ERROR_NOT_FOUND : NVML_ERROR_NO_PERMISSION;
    }
    std::string proc_name = cmd.data.substr(0, cmd.data.find('\0'));
    if (proc_name.empty()) {
      ReadResult comm = read_file(base + "/comm");
      if (!comm.ok()) return NVML_ERROR_NOT_FOUND;
      proc_name = comm.data.substr(0, comm.data.find('\n'));
    }
    // Truncates to the buffer like the real call.
    std::size_t n = std::min<std::size_t>(proc_name.size(), length - 1);
    proc_name.copy(name, n);
    name[n] = '\0';
    return NVML_SUCCESS;
  });
}
