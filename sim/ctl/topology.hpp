// Deterministic identities for simulated GPUs: UUIDs, PCI locations, MIG profiles and the
// nvidia-caps minors, so that tests and docs can name them in advance.
#pragma once

#include <cstdint>
#include <string>

#include "common/config.hpp"

namespace gpusim::ctl {

inline constexpr const char* kDefaultGpuName = "NVIDIA H100 80GB HBM3";

// GPU `index`: UUID "GPU-5b3f0c<ii>-0000-4000-8000-<index:012x>", PCI bus from a DGX-like
// list (17, 2A, 3D, 63, AB, BD, CF, E1; domain increments every 8 GPUs), H100 PCI ids.
Gpu make_gpu(unsigned index, unsigned minor, const std::string& name, std::uint64_t memory_total,
             std::uint64_t memory_reserved);

// Splits the GPU evenly into `count` (1..7) MIG instances: GI 1..count, CI 0, named
// "MIG <7/count>g.<GiB>gb", UUIDs "MIG-…", and nvidia-cap minors as in
// /proc/driver/nvidia-caps/mig-minors (gpu<minor>/gi<gi>/access and .../ci0/access).
void make_mig_instances(Gpu& gpu, unsigned gpu_index, unsigned count);

}  // namespace gpusim::ctl
