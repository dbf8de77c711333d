// After the targets end: poll the driver until each GPU shows the memory the plan expected to
// free released (the targets no longer listed, and used memory down by the expected amount,
// allowing for other processes' growth), up to a timeout. Then say, per GPU, what was freed
// and how long it took, or who still holds it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kill/escalation.hpp"
#include "kill/kill_plan.hpp"
#include "nvml/driver_reading.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

struct GpuVerification {
  unsigned index = 0;
  std::uint64_t expected_free_bytes = 0;
  std::optional<std::uint64_t> freed_bytes;  // baseline used - used now (>= 0); unknown without readings
  bool verified = false;
  std::optional<double> verify_ms;           // from the start of verification to the release
  std::vector<pid_t> still_held_by;          // surviving holders of the GPU's device file
  std::optional<std::uint64_t> held_bytes;   // what is still missing from the expected release
  std::string message;                       // for a person, when not verified
};

// One GPU's state against the plan: the bytes freed when released, nullopt while not yet.
std::optional<std::uint64_t> released_bytes(const PlannedGpu& planned, const GpuReading& now);

struct VerifyOptions {
  std::chrono::milliseconds timeout{30000};
  std::chrono::milliseconds interval{50};
  // Processes the caller left running on purpose (run: an MPS server that serves other jobs):
  // named among the holders, never in the advice to kill them.
  std::set<pid_t> left_on_purpose;
  // What stops the wait early (a daemon asked to stop): the GPUs not verified by then say so.
  Interruption interruption;
};

// Waits one interval between two readings; the interrupting signal when one came (0: none).
int pause_between_readings(const VerifyOptions& options);
// A GPU's message when an interruption ended the wait for its release.
std::string interrupted_verification_text(const std::string& gpu, int signal);

// Reads the driver (nullopt when it cannot be read); a full snapshot for the final diagnosis.
using DriverPoll = std::function<std::optional<DriverReading>()>;
using SnapshotPoll = std::function<std::unique_ptr<Snapshot>()>;

std::vector<GpuVerification> verify_release(const KillPlan& plan, const DriverPoll& poll_driver,
                                            const SnapshotPoll& take_snapshot, const VerifyOptions& options);

// Who still holds GPU `index` after the kill: surviving targets, and holders that are not the
// driver's own listed processes nor workers of a process we did not target.
std::vector<pid_t> remaining_holders(const KillPlan& plan, const Snapshot& snapshot, unsigned index);

}  // namespace gpureap
