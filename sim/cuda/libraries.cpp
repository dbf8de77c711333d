#include "cuda/libraries.hpp"

#include <dlfcn.h>
#include <fmt/core.h>

#include <cstdlib>

#include "common/layout.hpp"
#include "common/nvml_client.hpp"

#ifndef GPUSIM_LIBCUDA_PATH
#error "compiled with the path of this build's libcuda.so.1 (sim/CMakeLists.txt)"
#endif

namespace gpusim::cuda {

Status load_libcuda() {
  // GPUSIM_LIBCUDA_LIBRARY: a copy that another user can reach when this build's tree is
  // closed to them (tests/support/reachable_copies.hpp).
  const char* from_env = std::getenv("GPUSIM_LIBCUDA_LIBRARY");
  const std::string path = from_env != nullptr && *from_env != '\0' ? from_env : GPUSIM_LIBCUDA_PATH;
  // Never closed: like the CUDA runtime, the process keeps the driver mapped until it exits.
  void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = ::dlerror();
    return Error{fmt::format("cannot load the CUDA driver library: {}", err ? err : path)};
  }
  using CuInitFn = int(unsigned);
  auto* cu_init = reinterpret_cast<CuInitFn*>(::dlsym(lib, "cuInit"));
  if (cu_init == nullptr) return Error{path + ": no cuInit"};
  if (int rc = cu_init(0); rc != 0) return Error{fmt::format("cuInit(0) returned {}", rc)};
  return ok_status();
}

Status attach_as_nvml_client(const std::string& state_dir) {
  auto nvml = NvmlClient::load(nvml_library_path());
  if (!nvml.ok()) return Error{"cannot load NVML: " + nvml.error().message};
  // The library finds the simulator through the environment, whatever --state said.
  ::setenv(kStateDirEnv, state_dir.c_str(), 1);
  using InitFn = nvmlReturn_t();
  using CountFn = nvmlReturn_t(unsigned*);
  using HandleFn = nvmlReturn_t(unsigned, nvmlDevice_t*);
  auto* init = nvml->fn<InitFn>("nvmlInit_v2");
  auto* count_fn = nvml->fn<CountFn>("nvmlDeviceGetCount_v2");
  auto* handle_fn = nvml->fn<HandleFn>("nvmlDeviceGetHandleByIndex_v2");
  if (init == nullptr || count_fn == nullptr || handle_fn == nullptr) {
    return Error{nvml->path() + ": not an NVML library (nvmlInit_v2 and friends missing)"};
  }
  if (nvmlReturn_t rc = init(); rc != NVML_SUCCESS) {
    return Error{fmt::format("nvmlInit_v2 failed: {} ({})", nvml->error_string(rc), static_cast<int>(rc))};
  }
  unsigned count = 0;
  if (nvmlReturn_t rc = count_fn(&count); rc != NVML_SUCCESS) {
    return Error{fmt::format("nvmlDeviceGetCount_v2 failed: {}", nvml->error_string(rc))};
  }
  // GPUs the library refuses (NO_PERMISSION) stay unopened, as for a real client.
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    (void)handle_fn(i, &dev);
  }
  return ok_status();  // no nvmlShutdown: a monitoring client holds the library while it runs
}

}  // namespace gpusim::cuda
