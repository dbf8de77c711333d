// What resetting a GPU means to the simulator, shared by `gpusim reset`/`free` and the
// simulated `nvidia-smi -r`: who still has the GPU's device file open (the check a real reset
// makes first), and dropping the GPU's allocations (what the reset does to memory).
#pragma once

#include <optional>
#include <set>
#include <string>

#include "common/config.hpp"
#include "common/layout.hpp"
#include "common/result.hpp"

namespace gpusim {

// PIDs with an open descriptor on `path`, found by their /proc/<pid>/fd link targets, the way
// fuser finds them. The caller counts too if it has the file open.
std::set<unsigned> device_holders(const std::string& path);

// Deletes every allocation not yet released on `gpu` (on all GPUs when nullopt, which also
// clears stale stamps and temp files); returns how many it deleted.
Result<unsigned> drop_allocations(const Layout& layout, const Config& config,
                                  std::optional<unsigned> gpu);

}  // namespace gpusim
