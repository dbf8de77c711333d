#include "smi/process_lists.hpp"

#include <cstring>
#include <string>

namespace gpusim::smi {

nvmlReturn_t read_process_list(const NvmlSession& s, nvmlDevice_t dev, ProcessList list,
                               std::vector<nvmlProcessInfo_v2_t>* out) {
  using ProcessListFn = nvmlReturn_t(nvmlDevice_t, unsigned*, void*);
  const std::string base = list == ProcessList::Compute    ? "nvmlDeviceGetComputeRunningProcesses"
                           : list == ProcessList::Graphics ? "nvmlDeviceGetGraphicsRunningProcesses"
                                                           : "nvmlDeviceGetMPSComputeRunningProcesses";
  std::size_t stride = sizeof(nvmlProcessInfo_v2_t);
  auto* f = s.fn<ProcessListFn>((base + "_v2").c_str());
  if (f == nullptr) {
    f = s.fn<ProcessListFn>(base.c_str());
    stride = sizeof(nvmlProcessInfo_v1_t);
  }
  if (f == nullptr) return NVML_ERROR_FUNCTION_NOT_FOUND;
  for (int attempt = 0; attempt < 5; ++attempt) {  // the list may grow between the two calls
    unsigned count = 0;
    nvmlReturn_t rc = f(dev, &count, nullptr);
    if (rc == NVML_SUCCESS) return rc;  // no processes
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) return rc;
    count += 4;
    std::vector<unsigned char> buf(count * stride);
    rc = f(dev, &count, buf.data());
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) continue;
    if (rc != NVML_SUCCESS) return rc;
    for (unsigned i = 0; i < count; ++i) {
      nvmlProcessInfo_v2_t rec{};
      std::memcpy(&rec, buf.data() + i * stride, stride);
      out->push_back(rec);
    }
    return rc;
  }
  return NVML_ERROR_INSUFFICIENT_SIZE;
}

}  // namespace gpusim::smi
