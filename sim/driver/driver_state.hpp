// The simulated driver's process-wide state and the per-call gate every entry point passes.
//
// NVML is thread-safe, refcounted (init/shutdown) and hands out device handles that stay valid
// for the life of the library; here a handle is a pointer into a static slot table.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "common/alloc_scan.hpp"
#include "common/config.hpp"
#include "common/layout.hpp"
#include "sim_nvml_abi.hpp"

#define GPUSIM_EXPORT extern "C" __attribute__((visibility("default")))

// The ABI declares nvmlDevice_st as opaque; this is the simulator's definition.
struct nvmlDevice_st {
  std::uint64_t magic;
  unsigned gpu;
  int mig_slot;  // -1: the physical GPU; else the MIG device index
  bool present;  // false: slot unused by the current configuration
};

namespace gpusim::driver {

// What a device handle designates, valid for the duration of one call.
struct Target {
  nvmlDevice_t handle = nullptr;
  unsigned gpu_index = 0;
  const Gpu* gpu = nullptr;
  const MigInstance* mig = nullptr;  // set for a MIG device handle
  bool is_mig() const { return mig != nullptr; }
};

// Identity queries keep working on a lost GPU (a tool must be able to say which GPU it is);
// anything that would talk to the hardware fails with GPU_IS_LOST.
enum class OnLost { Fail, Allow };

// The gate: takes the driver lock, checks initialization, picks up config changes made by
// `gpusim` since the last call and applies injected faults for `symbol`.
class Call {
 public:
  explicit Call(const char* symbol);
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // Nonzero: the entry point must return it (UNINITIALIZED or an injected fault).
  nvmlReturn_t rc() const { return rc_; }

  // Validates a handle and applies the per-GPU fault and the lost state.
  nvmlReturn_t resolve(nvmlDevice_t handle, Target* out, OnLost on_lost = OnLost::Fail);

  // The per-GPU fault for calls that name a GPU by index or UUID instead of a handle.
  std::optional<int> gpu_fault(unsigned gpu) const;

  // Opens the GPU's device file if this init session has not yet: every call that hands out
  // a handle does this first, as the real library does.
  nvmlReturn_t attach_gpu(unsigned gpu);

  const Config& config() const;
  const Layout& layout() const;
  nvmlDevice_t physical_handle(unsigned gpu) const;
  nvmlDevice_t mig_handle(unsigned gpu, unsigned slot) const;

  // Current allocations on `gpu` (applies the release rules to them as a side effect, like the
  // driver's teardown would have). An unreadable allocs/ directory is OPERATING_SYSTEM-ish:
  // UNKNOWN.
  std::optional<std::vector<AllocView>> scan(unsigned gpu) const;

 private:
  std::unique_lock<std::mutex> lock_;
  const char* symbol_;
  nvmlReturn_t rc_ = NVML_SUCCESS;
};

// nvmlInit*, refcounted. `legacy_v1` is the plain nvmlInit, which attached every GPU and so
// fails when one is lost.
nvmlReturn_t driver_init(const char* symbol, unsigned flags, bool legacy_v1);
nvmlReturn_t driver_shutdown();

// Copies a string into a caller buffer the NVML way: INSUFFICIENT_SIZE if it does not fit.
nvmlReturn_t copy_out(const std::string& s, char* buf, unsigned length);

// Runs an entry point body, turning any escaping exception into an NVML code: the library
// must never take its host process down.
template <class F>
nvmlReturn_t guarded(F&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return NVML_ERROR_MEMORY;
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

// The preamble every per-device entry point shares, in this order: the call's gate (not
// initialized, an injected fault), then the handle (a lost GPU refused unless `on_lost` is
// OnLost::Allow), then `body(call, target)`, all under `guarded`.
template <class Body>
nvmlReturn_t on_device(const char* symbol, nvmlDevice_t device, OnLost on_lost, Body&& body) noexcept {
  return guarded([&]() -> nvmlReturn_t {
    Call call(symbol);
    if (call.rc() != NVML_SUCCESS) return call.rc();
    Target t;
    if (auto rc = call.resolve(device, &t, on_lost)) return rc;
    return body(call, static_cast<const Target&>(t));
  });
}

template <class Body>
nvmlReturn_t on_device(const char* symbol, nvmlDevice_t device, Body&& body) noexcept {
  return on_device(symbol, device, OnLost::Fail, std::forward<Body>(body));
}

}  // namespace gpusim::driver
