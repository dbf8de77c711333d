// Framebuffer memory: v1 (used = reserved + allocated), v2 (used = allocated) and the
// confidential-computing split. Allocated memory = the GPU's base_used plus every allocation
// not yet released: owned, orphaned (held by inheritors), leaked or still being torn down.
#include <algorithm>

#include "driver/driver_state.hpp"

using namespace gpusim;
using namespace gpusim::driver;

namespace {

struct MemoryFigures {
  unsigned long long total = 0;
  unsigned long long reserved = 0;
  unsigned long long allocated = 0;
};

std::optional<MemoryFigures> figures(const Call& call, const Target& t) {
  auto views = call.scan(t.gpu_index);
  if (!views) return std::nullopt;
  MemoryFigures f;
  if (t.is_mig()) {
    // A MIG instance owns a fixed slice; driver-reserved memory stays with the parent.
    f.total = t.mig->memory_total;
    f.allocated = allocated_bytes_on_instance(*views, t.gpu_index, t.mig->gi);
  } else {
    f.total = t.gpu->memory_total;
    f.reserved = t.gpu->memory_reserved;
    f.allocated = t.gpu->base_used + allocated_bytes(*views, t.gpu_index);
  }
  return f;
}

unsigned long long saturating_sub(unsigned long long a, unsigned long long b) {
  return a > b ? a - b : 0;
}

}  // namespace

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return on_device("nvmlDeviceGetMemoryInfo", device, [&](Call& call, const Target& t) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    auto f = figures(call, t);
    if (!f) return NVML_ERROR_UNKNOWN;
    nvmlMemory_t out{};
    out.total = f->total;
    out.used = std::min(f->total, f->reserved + f->allocated);
    out.free = out.total - out.used;
    *memory = out;
    return NVML_SUCCESS;
  });
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  return on_device("nvmlDeviceGetMemoryInfo_v2", device, [&](Call& call, const Target& t) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    auto f = figures(call, t);
    if (!f) return NVML_ERROR_UNKNOWN;
    nvmlMemory_v2_t out{};
    out.version = memory->version;
    out.total = f->total;
    out.reserved = f->reserved;
    out.used = f->allocated;
    out.free = saturating_sub(saturating_sub(f->total, f->reserved), f->allocated);
    *memory = out;
    return NVML_SUCCESS;
  });
}

// Confidential computing is never enabled on a simulated GPU: nothing is protected.
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device,
                                                              nvmlConfComputeMemSizeInfo_t* memInfo) {
  return on_device("nvmlDeviceGetConfComputeMemSizeInfo", device, [&](Call&, const Target& t) {
    if (memInfo == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (t.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    memInfo->protectedMemSizeKib = 0;
    memInfo->unprotectedMemSizeKib = t.gpu->memory_total / 1024;
    return NVML_SUCCESS;
  });
}
