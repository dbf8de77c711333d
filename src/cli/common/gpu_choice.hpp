// The GPUs a --gpu or --gpus option names, for every command that takes one: NVIDIA GPUs by NVML
// index ("0"), range ("2-3", the forms of CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS) or UUID
// ("GPU-8f1c…", or a prefix naming exactly one), and a GPU of any vendor by PCI address
// ("0000:c1:00.0", or "c1:00.0" in domain 0), comma-separated.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "snapshot/snapshot.hpp"

namespace gpureap {

struct GpuChoice {
  std::set<unsigned> nvidia;  // NVML indices (an NVIDIA GPU named by PCI address too)
  std::set<std::string> drm;  // PCI addresses of AMD and Intel GPUs, as sysfs writes them
  bool empty() const { return nvidia.empty() && drm.empty(); }
  bool has_nvidia(unsigned index) const { return nvidia.count(index) > 0; }
  bool has_drm(const std::string& pci) const { return drm.count(pci) > 0; }
};

struct GpuChoiceError {
  std::string message;  // one line, beginning with the option
  // An NVIDIA index, range or UUID while NVIDIA's library is not loaded: the driver's failure
  // (its exit status), not a mistake in the list.
  bool needs_nvidia_library = false;
};

// What `items` (each one or a comma-separated list) name among the snapshot's GPUs; nullopt and
// `error` for an item that names none (an unknown index, UUID or address, an index while
// NVIDIA's library is not loaded, an ambiguous UUID prefix, a bad range, an empty item).
std::optional<GpuChoice> resolve_gpu_choice(const std::vector<std::string>& items, const Snapshot& snapshot,
                                            const std::string& option, GpuChoiceError& error);

// The exit status for `error`: the driver's failure (3 or 4) for an NVIDIA index while NVIDIA's
// library is missing on a host with NVIDIA GPUs, else a usage error (2).
int gpu_choice_error_status(const GpuChoiceError& error, const Snapshot& snapshot);

}  // namespace gpureap
