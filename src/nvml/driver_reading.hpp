// Everything the driver told us in one pass: per GPU, its facts and its process lists.
// Each fact is optional: what this driver or GPU does not report stays unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nvml/nvml_errors.hpp"

namespace gpureap {

class NvmlLibrary;

// Which lists a process appeared in: C (compute), G (graphics), M (MPS client).
struct ProcessTypes {
  bool compute = false;
  bool graphics = false;
  bool mps = false;
  std::string label() const;  // "C", "G", "M", "C+G", "C+M", ...
};

struct DriverProcess {
  unsigned pid = 0;  // as the driver reports it: a host PID, even for containers
  ProcessTypes types;
  std::optional<std::uint64_t> used_memory;  // nullopt when the driver does not know
  std::optional<unsigned> gpu_instance_id;   // MIG
  std::optional<unsigned> compute_instance_id;
  std::optional<unsigned> sm_util_percent;
  std::optional<unsigned> mem_util_percent;
};

struct MemoryReading {
  std::optional<std::uint64_t> total;
  std::optional<std::uint64_t> reserved;  // v2 only
  std::optional<std::uint64_t> free;
  std::optional<std::uint64_t> used;      // v2: allocated; v1: reserved + allocated
  std::string source;                     // "v2", "v1" or "" when unknown
};

struct MigDeviceReading {
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  std::string uuid;
  std::string name;
  MemoryReading memory;
};

struct GpuReading {
  unsigned index = 0;
  std::optional<NvmlError> error;  // the GPU as a whole failed (lost, no permission, ...)
  std::string uuid;
  std::string name;
  std::string pci_bus_id;
  std::optional<unsigned> minor_number;  // N of /dev/nvidia<N>
  std::optional<unsigned> temperature_c;
  std::optional<unsigned> power_mw;
  std::optional<unsigned> power_limit_mw;  // enforced (after every limiter)
  std::optional<unsigned> fan_percent;     // may exceed 100; unknown on boards without a fan
  std::optional<unsigned> performance_state;  // N of PN: 0 fastest, 15 slowest
  std::optional<unsigned> util_gpu_percent;
  std::optional<unsigned> util_memory_percent;
  std::optional<bool> persistence_mode;
  MemoryReading memory;
  bool mig_enabled = false;
  std::vector<MigDeviceReading> mig_devices;
  std::vector<DriverProcess> processes;  // compute, graphics and MPS lists merged per PID+instance
  // The driver answered nvmlDeviceGetProcessUtilization: a listed process without a sample
  // (sm_util_percent unset) had no activity in the window. False when it cannot say (the call
  // is missing, MIG, an error): then nothing proves a process idle.
  bool process_utilization_known = false;
  // When the per-process utilization was asked for (Unix µs): a reading made with this one as
  // `previous` asks for the samples since then, so that looks read seconds or minutes apart
  // (watch's driver cadence) see any activity between them. 0: not read.
  std::uint64_t utilization_read_at_us = 0;
  bool processes_complete = true;        // false when a process list could not be read
  std::vector<std::string> warnings;     // a person should see these (stride override, list errors)
};

struct DriverReading {
  std::string library_path;
  std::string driver_version;
  std::string nvml_version;
  std::optional<int> cuda_driver_version;  // 12040 = 12.4
  std::optional<NvmlError> error;  // the GPUs could not even be counted
  std::vector<GpuReading> gpus;
};

// How much of each GPU to read.
enum class DriverReadScope {
  Everything,  // identity, health (temperature, power, persistence, utilisation), memory, MIG, processes
  Processes,   // identity, MIG, the process lists and per-process utilisation: what watch's looks need
};

// Reads every GPU the library exposes. Never throws on driver errors: a GPU that fails is
// kept with its error and the others are still read.
// `previous`, a reading of the same library (watch's last look), sizes the process-list and
// utilisation buffers from the counts it found, saving the sizing call of each, and the
// utilisation samples asked for are those since its own (at least the last 2 s).
DriverReading read_driver(const NvmlLibrary& library, DriverReadScope scope = DriverReadScope::Everything,
                          const DriverReading* previous = nullptr);

}  // namespace gpureap
