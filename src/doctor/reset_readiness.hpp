// Whether `nvidia-smi -r -i N` can work now, and what blocks it: it needs root, and no process
// may use the GPU — CUDA processes, holders of its device file (orphaned workers), NVML clients
// (monitors, exporters, DCGM) — and persistence mode counts as a client.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "snapshot/snapshot.hpp"

namespace gpureap {

struct ResetBlocker {
  std::string kind;   // "not-root", "gpu-process", "holder", "nvml-client", "persistence-mode", "gpu-error"
  std::optional<pid_t> pid;
  std::string text;   // for a person, with what to do
};

struct ResetReadiness {
  unsigned gpu = 0;
  std::vector<ResetBlocker> blockers;
  bool ready() const { return blockers.empty(); }
  nlohmann::json to_json() const;
};

ResetReadiness check_reset_readiness(const Snapshot& snapshot, unsigned gpu_index);

// How a printed command (nvidia-smi -i, gpureap kill --gpu) names the GPU: by UUID, or bus id,
// never by an index, which names whichever GPU the driver counts Nth when the command runs (a
// GPU falling off the bus shifts the ones after it). The index only when the driver gave neither.
std::string gpu_device_id(const GpuReading& gpu);

}  // namespace gpureap
