// The simulated libnvidia-ml.so.1 as its clients use it: loaded with dlopen by path, entry
// points looked up by name. gpusim-cuda --nvml-client and the simulated nvidia-smi load it so
// that their device descriptors, and what they report, come from the library itself.
#pragma once

#include <string>

#include "common/result.hpp"
#include "sim_nvml_abi.hpp"

namespace gpusim {

inline constexpr const char* kNvmlLibraryEnv = "GPUSIM_NVML_LIBRARY";

// Which generation to load: $GPUSIM_NVML_LIBRARY, else $GPUREAP_NVML_LIBRARY (what the
// product's tests point gpureap at, so a simulated client uses the same driver), else the r550
// library of this build.
std::string nvml_library_path();

class NvmlClient {
 public:
  // dlopen(RTLD_NOW | RTLD_LOCAL). The library stays loaded for the life of the process, as a
  // real client keeps it: nothing is ever dlclose()d.
  static Result<NvmlClient> load(const std::string& path);

  const std::string& path() const { return path_; }
  void* symbol(const char* name) const;
  template <class Fn>
  Fn* fn(const char* name) const {
    return reinterpret_cast<Fn*>(symbol(name));
  }
  // nvmlErrorString, or a generic text if the library lacks it.
  std::string error_string(nvmlReturn_t rc) const;

 private:
  NvmlClient(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_ = nullptr;
  std::string path_;
};

}  // namespace gpusim
