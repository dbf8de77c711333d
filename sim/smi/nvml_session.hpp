// The simulated nvidia-smi's use of NVML: load the library, initialise it, select the GPUs -i
// names. Failures print what the real tool prints and carry its exit status.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/nvml_client.hpp"
#include "smi/smi.hpp"

namespace gpusim::smi {

struct SelectedGpu {
  unsigned index = 0;
  nvmlDevice_t handle = nullptr;
  std::string uuid;
  std::string bus_id;
};

class NvmlSession {
 public:
  // Loads nvml_library_path() and calls nvmlInit_v2. nullopt after printing the failure; the
  // exit status is then in *exit_status.
  static std::optional<NvmlSession> open(int* exit_status);
  ~NvmlSession();
  NvmlSession(NvmlSession&& other) noexcept : nvml_(other.nvml_), live_(other.live_) { other.live_ = false; }
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;
  NvmlSession& operator=(NvmlSession&&) = delete;

  const NvmlClient& nvml() const { return nvml_; }
  template <class Fn>
  Fn* fn(const char* name) const {
    return nvml_.fn<Fn>(name);
  }

  // Every GPU (or the one -i names) the library hands a handle for. nullopt after printing
  // "No devices were found".
  std::optional<std::vector<SelectedGpu>> select(const std::optional<std::string>& id, int* exit_status);

  // "[<nvmlErrorString>]", or "[N/A]" for NOT_SUPPORTED, as nvidia-smi fills a field it cannot read.
  std::string field_error(nvmlReturn_t rc) const;

 private:
  explicit NvmlSession(NvmlClient nvml) : nvml_(std::move(nvml)) {}
  NvmlClient nvml_;
  bool live_ = true;
};

// Bytes to whole MiB, as nvidia-smi reports memory.
std::string mib(unsigned long long bytes, bool with_unit);

}  // namespace gpusim::smi
