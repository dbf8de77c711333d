// --gpus for `reap`: the forms of CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS: indices and ranges
// ("0,2-3") and GPU UUIDs ("GPU-8f1c…", or a prefix naming exactly one GPU), comma-separated.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "nvml/driver_reading.hpp"

namespace gpureap {

// The indices `list` names among `gpus`; on error, empty and `error` holds one line naming
// the item (unknown index or UUID, an ambiguous UUID prefix, a bad range, an empty item).
std::set<unsigned> resolve_gpu_list(const std::string& list, const std::vector<GpuReading>& gpus, std::string& error);

}  // namespace gpureap
