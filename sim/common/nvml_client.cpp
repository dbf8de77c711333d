#include "common/nvml_client.hpp"

#include <dlfcn.h>

#include <cstdlib>

#ifndef GPUSIM_DEFAULT_NVML_LIBRARY
#error "compiled with the path of this build's r550 library (sim/CMakeLists.txt)"
#endif

namespace gpusim {

static const char* non_empty_env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::string nvml_library_path() {
  if (const char* v = non_empty_env(kNvmlLibraryEnv)) return v;
  if (const char* v = non_empty_env("GPUREAP_NVML_LIBRARY")) return v;
  return GPUSIM_DEFAULT_NVML_LIBRARY;
}

Result<NvmlClient> NvmlClient::load(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    return Error{err != nullptr ? err : path + ": cannot be loaded"};
  }
  return NvmlClient(handle, path);
}

void* NvmlClient::symbol(const char* name) const { return ::dlsym(handle_, name); }

std::string NvmlClient::error_string(nvmlReturn_t rc) const {
  using ErrorStringFn = const char*(nvmlReturn_t);
  if (auto* f = fn<ErrorStringFn>("nvmlErrorString")) {
    if (const char* s = f(rc)) return s;
  }
  return "NVML error " + std::to_string(static_cast<int>(rc));
}

}  // namespace gpusim
