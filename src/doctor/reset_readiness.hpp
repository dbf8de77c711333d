// Whether `nvidia-smi -r -i N` can work now, and what blocks it: it needs root, and no process
// may use the GPU — CUDA processes, holders of its device file (orphaned workers), NVML clients
// (monitors, exporters, DCGM) — and persistence mode counts as a client.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "doctor/evidence.hpp"

#include "doctor/finding.hpp"
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
  Evidence evidence() const;  // its facts in a finding's evidence
};

ResetReadiness check_reset_readiness(const Snapshot& snapshot, unsigned gpu_index);

// What a reset of an AMD GPU would affect. amdgpu resets the GPUs of an XGMI hive together:
// amdgpu_device_gpu_recover (amdgpu_device.c) puts every device of the hive's device_list in its
// reset list when xgmi.num_physical_nodes > 1 (not under SR-IOV). So the scope is the hive's
// GPUs, each with the processes that would lose their work: its DRM clients (each client's
// processes once) and the KFD processes with VRAM on it. Read-only; nothing here resets.
struct AmdResetGpu {
  std::string pci_address;
  std::vector<pid_t> client_pids;  // processes holding a DRM client of it, ascending
  std::vector<pid_t> kfd_pids;     // KFD processes with VRAM on it, ascending
};
struct AmdResetScope {
  std::optional<std::uint64_t> hive_id;  // nullopt: the GPU is in no hive and resets alone
  std::vector<AmdResetGpu> gpus;         // the GPU itself first, then the hive's others by PCI address
  // One line a GPU for a person ("0000:03:00.0: PIDs 412 (python3), ..."), commands raw (the
  // renderer escapes them).
  std::vector<std::string> lines(const Snapshot& snapshot) const;
  // A finding's details: what a reset of `device` takes with it, then lines() indented.
  std::vector<std::string> details(const Snapshot& snapshot, const drm::DrmDevice& device) const;
  // The reset itself (debugfs amdgpu_gpu_recover of its card node), a high-risk remedy printed,
  // never run; nullopt when the GPU has no card node.
  std::optional<Remedy> remedy(const drm::DrmDevice& device) const;
  Evidence evidence() const;  // its facts in a finding's evidence
};
AmdResetScope amd_reset_scope(const Snapshot& snapshot, const drm::DrmDevice& device);

// How a printed command (nvidia-smi -i, gpureap kill --gpu) names the GPU: by UUID, or bus id,
// never by an index, which names whichever GPU the driver counts Nth when the command runs (a
// GPU falling off the bus shifts the ones after it). The index only when the driver gave neither.
std::string gpu_device_id(const GpuReading& gpu);

}  // namespace gpureap
