// After the targets end: poll the DRM side (sysfs and the fdinfo of every process still holding
// a node) until each AMD or Intel GPU of the plan shows its release: none of the clients the
// targets held is held by anyone (one a process outside the plan shares keeps it unreleased,
// and that process is named), none of their KFD contexts is left, and the driver's own
// VRAM use (amdgpu's mem_info_vram_used; i915 and xe report none) has dropped by what those
// clients held privately, with other clients' change counted both ways. Then say, per GPU, what
// came back and how long it took, or what still holds it. i915 and xe report no device figure:
// their release is never called verified.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "drm/drm_reading.hpp"
#include "kill/kill_plan.hpp"
#include "kill/memory_verification.hpp"

namespace gpureap {

struct DrmGpuVerification {
  std::string pci_address;
  std::string vendor;
  std::uint64_t expected_free_bytes = 0;
  std::optional<std::uint64_t> freed_bytes;  // by the driver's VRAM figure; unknown without one
  std::string driver;                        // "amdgpu", "i915", "xe"
  bool verified = false;
  // The driver reports no VRAM figure (i915, xe): the clients are gone, the release unprovable.
  bool unverifiable = false;
  std::optional<double> verify_ms;
  std::vector<pid_t> still_held_by;          // processes holding a client that should have gone
  std::vector<pid_t> kfd_left;               // targets whose KFD context is still listed
  std::optional<std::uint64_t> held_bytes;   // what is still missing from the expected drop
  std::string message;                       // for a person, when not verified
};

// The GPU's state against the plan: the bytes freed once released, or why not yet.
struct DrmReleaseState {
  bool released = false;
  std::optional<std::uint64_t> freed_bytes;
  std::vector<pid_t> still_held_by;
  std::vector<pid_t> kfd_left;
  bool device_missing = false;
  bool no_figure = false;        // the driver has no VRAM figure: never released
  bool unattributable = false;   // the baseline held unexplained VRAM beyond the allowance, still held
  std::uint64_t unexplained_now = 0;
};
DrmReleaseState drm_release_state(const PlannedDrmGpu& planned, const drm::DrmReading& now);

// A fresh DRM reading (devices, the clients of every process holding a node, KFD processes);
// nullopt when it cannot be taken.
using DrmPoll = std::function<std::optional<drm::DrmReading>()>;

std::vector<DrmGpuVerification> verify_drm_release(const KillPlan& plan, const DrmPoll& poll_drm,
                                                   const VerifyOptions& options);

}  // namespace gpureap
