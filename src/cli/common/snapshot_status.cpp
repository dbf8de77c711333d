#include "cli/common/snapshot_status.hpp"

#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"

namespace gpureap {

int snapshot_exit_status(const Snapshot& snapshot) {
  const auto& d = snapshot.driver;
  if (d.no_nvidia_gpus()) return exit_code::kOk;  // an AMD- or Intel-only host
  if (!d.loaded) return driver_failure_status(snapshot);
  if (d.count_error) return exit_code::kDriverInitFailed;
  for (const auto& gpu : snapshot.gpus) {
    if (gpu.reading.error) return exit_code::kGpuError;
  }
  return exit_code::kOk;
}

int driver_failure_status(const Snapshot& snapshot) {
  return snapshot.driver.failure == LoadFailure::LibraryNotFound ? exit_code::kNoDriverLibrary
                                                                 : exit_code::kDriverInitFailed;
}

std::string unknown_gpu_error(const Snapshot& snapshot, const std::vector<unsigned>& wanted) {
  if (!snapshot.driver.loaded) return {};
  for (unsigned index : wanted) {
    if (snapshot.gpu_by_index(index) != nullptr) continue;
    std::string known;
    for (const auto& gpu : snapshot.gpus) known += (known.empty() ? "" : ", ") + std::to_string(gpu.reading.index);
    return fmt::format("--gpu {}: no such GPU (this host has: {})", index, known.empty() ? "none" : known);
  }
  return {};
}

}  // namespace gpureap
