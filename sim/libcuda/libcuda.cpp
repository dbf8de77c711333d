// A stand-in for the CUDA driver library, built as libcuda.so.1. It does nothing; it exists to
// be mapped. Every CUDA application has libcuda.so.1 in /proc/<pid>/maps, and so has every
// fork()ed child of one (a DataLoader worker), while a pure NVML client (nvidia-smi, an
// exporter, DCGM) maps libnvidia-ml.so.1 only. gpusim-cuda loads it whenever it allocates.
#define GPUSIM_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
constexpr int kCudaSuccess = 0;
constexpr int kCudaErrorInvalidValue = 1;
constexpr int kDriverVersion = 12040;  // CUDA 12.4, as the r550 library reports
}  // namespace

GPUSIM_CUDA_EXPORT int cuInit(unsigned int flags) {
  return flags == 0 ? kCudaSuccess : kCudaErrorInvalidValue;  // the real one takes 0 only
}

GPUSIM_CUDA_EXPORT int cuDriverGetVersion(int* version) {
  if (version == nullptr) return kCudaErrorInvalidValue;
  *version = kDriverVersion;
  return kCudaSuccess;
}
