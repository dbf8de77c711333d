// NVML return codes as names a person can search for.
#pragma once

#include <string>

namespace gpureap {

// "GPU_IS_LOST" for 15, "SUCCESS" for 0, "UNKNOWN_ERROR_<n>" for codes the ABI does not define.
std::string nvml_error_name(int code);

// An NVML call that failed: the code, its name and the library's own text for it.
struct NvmlError {
  int code = 0;
  std::string call;     // the symbol that returned it, e.g. "nvmlDeviceGetMemoryInfo_v2"
  std::string message;  // nvmlErrorString(code), or the name when the library gives none
  std::string name() const { return nvml_error_name(code); }
};

}  // namespace gpureap
