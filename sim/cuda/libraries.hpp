// The driver libraries a simulated process loads, so that /proc/<pid>/maps and /proc/<pid>/fd
// look as they do for the real thing: a CUDA application maps libcuda.so.1 (and its forked
// workers inherit the mapping); an NVML client maps libnvidia-ml.so.1 only, and its device
// descriptors are the ones that library opens.
#pragma once

#include <string>

#include "common/result.hpp"

namespace gpusim::cuda {

// dlopen()s this build's libcuda.so.1 (absolute path compiled in) and calls cuInit(0).
Status load_libcuda();

// Loads the simulated NVML (nvml_library_path()), points it at `state_dir`, calls nvmlInit_v2
// and takes a handle to every GPU it may open. The library then holds nvidiactl and each of
// those GPUs' device files until the process ends; nothing is allocated.
Status attach_as_nvml_client(const std::string& state_dir);

}  // namespace gpusim::cuda
