// What distinguishes one simulated driver generation from another at run time. Which symbols
// exist is decided at link time by the generation's version script (see sim/CMakeLists.txt);
// this is the rest. generation.cpp is compiled once per generation with GPUSIM_GEN_* defines.
#pragma once

namespace gpusim {

struct Generation {
  const char* name;            // "r550"
  const char* driver_version;  // "550.54.15"
  int nvml_major;              // NVML version = "<major>.<driver_version>"
  int cuda_version;            // nvmlSystemGetCudaDriverVersion: 12040 = 12.4
  unsigned v3_stride;          // bytes per record written by *RunningProcesses_v3 (0: absent)
  // The driver lists MPS clients (nvmlDeviceGetMPSComputeRunningProcesses exists). Where it
  // does not, the MPS server is the only CUDA process listed, with its clients' memory.
  bool lists_mps_clients;
};

extern const Generation kGeneration;

}  // namespace gpusim
