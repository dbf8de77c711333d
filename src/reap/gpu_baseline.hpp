// The check after `gpureap reap` that each GPU the job used is back to its baseline: the driver
// lists none of the job's PIDs, and the memory in use beyond what processes outside the job
// hold is within the baseline.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <sys/types.h>

#include "nvml/driver_reading.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

// What a GPU may still show used when the job is gone: the per-process overhead tolerance for
// the processes outside the selection, plus, with v1 figures (used includes the driver's
// unreported reservation), the reservation allowance. --baseline-mib replaces it.
std::uint64_t default_baseline_bytes(const GpuView& gpu, std::size_t outside_listed);

struct ReapGpuCheck {
  unsigned index = 0;
  std::optional<std::uint64_t> baseline_override;  // --baseline-mib
};

struct ReapGpuResult {
  unsigned index = 0;
  bool verified = false;
  std::optional<double> verify_ms;
  std::optional<std::uint64_t> used_bytes;     // at the last reading
  std::uint64_t outside_bytes = 0;             // listed memory of processes outside the selection
  std::uint64_t baseline_bytes = 0;
  std::vector<pid_t> still_listed;             // the selection's PIDs the driver still lists
  std::string message;                         // for a person, when not verified
};

struct ReapVerifyOptions {
  std::chrono::milliseconds timeout{30000};
  std::chrono::milliseconds interval{50};
};

// Polls the driver until every GPU shows none of `listed_pids` and used - outside <= baseline,
// up to the timeout. nullopt readings (driver gone) end the wait: not verified.
std::vector<ReapGpuResult> verify_baseline(const std::vector<ReapGpuCheck>& gpus, const std::set<pid_t>& listed_pids,
                                           const std::function<std::optional<DriverReading>()>& poll_driver,
                                           const ReapVerifyOptions& options);

}  // namespace gpureap
