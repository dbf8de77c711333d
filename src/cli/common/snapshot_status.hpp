// What one snapshot means for the exit status of the commands that show it (ps, top --once),
// and the `--gpu` check they and kill share: an index the driver does not have is a usage
// error, never an empty listing.
#pragma once

#include <string>
#include <vector>

#include "snapshot/snapshot.hpp"

namespace gpureap {

// 0, or 3 (no driver library), 4 (it failed to initialise or to count), 5 (a GPU reported an
// error): docs/exit-codes.md.
int snapshot_exit_status(const Snapshot& snapshot);

// The driver could not be read: 3 when NVIDIA's library is missing, else 4 (it failed to
// initialise).
int driver_failure_status(const Snapshot& snapshot);

// "" when the driver has every index wanted (or cannot be read, which is said elsewhere);
// otherwise "--gpu 7: no such GPU (this host has: 0, 1)" for the first one it lacks.
std::string unknown_gpu_error(const Snapshot& snapshot, const std::vector<unsigned>& wanted);

}  // namespace gpureap
