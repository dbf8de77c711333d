// The simulated machine: GPUs, their MIG instances and knobs, and injected faults.
// Stored as state/config.json; `gpusim` writes it, the library and gpusim-cuda read it.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace gpusim {

inline constexpr unsigned kMaxGpus = 32;
inline constexpr unsigned kMaxMigSlots = 7;  // H100/A100: at most 7 MIG devices per GPU

struct MigInstance {
  unsigned gi = 0;  // GPU instance id
  unsigned ci = 0;  // compute instance id
  std::string name;  // "MIG 2g.20gb"
  std::string uuid;  // "MIG-…"
  std::uint64_t memory_total = 0;
  unsigned cap_gi_minor = 0;  // dev/nvidia-caps/nvidia-cap<N> for the GPU instance
  unsigned cap_ci_minor = 0;  // ... and for its compute instance
};

struct Gpu {
  std::string name;
  std::string uuid;
  unsigned pci_domain = 0;
  unsigned pci_bus = 0;
  unsigned pci_device = 0;
  std::uint32_t pci_device_id = 0;     // device id << 16 | vendor id
  std::uint32_t pci_subsystem_id = 0;
  unsigned minor = 0;                  // dev/nvidia<minor>
  std::uint64_t memory_total = 0;
  std::uint64_t memory_reserved = 0;
  std::uint64_t base_used = 0;         // allocated memory no simulated process explains
  bool lost = false;                   // fell off the bus: queries return GPU_IS_LOST
  bool no_permission = false;          // GetHandleByIndex_v2 returns NO_PERMISSION
  bool memory_not_available = false;   // process records carry NVML_VALUE_NOT_AVAILABLE
  unsigned temperature = 35;           // deg C
  unsigned power_mw = 70000;
  unsigned util_gpu = 0;               // percent, added to by processes' --sm-util
  unsigned util_mem = 0;
  bool persistence = true;
  int compute_mode = 0;
  // Board telemetry that monitoring tools show (nvitop, gpustat). Defaults: an H100 SXM.
  int fan_speed = -1;                  // percent of maximum; -1: no fan (passively cooled SXM)
  int pstate = -1;                     // 0..15; -1: P0 while a context exists or util_gpu > 0, else P8
  unsigned power_limit_mw = 700000;    // the management limit (H100 SXM: 700 W board power)
  unsigned enforced_power_limit_mw = 0;  // another limiter; 0 = none, the enforced limit is the power limit
  bool ecc = true;                     // ECC mode (on for data-centre GPUs)
  std::uint64_t ecc_corrected = 0;     // volatile and aggregate counts alike
  std::uint64_t ecc_uncorrected = 0;
  unsigned util_enc = 0;               // video encoder / decoder utilization, percent
  unsigned util_dec = 0;
  bool display_active = false;
  std::uint64_t release_delay_ms = 0;  // default teardown time after the last descriptor closes
  bool mig_enabled = false;
  std::vector<MigInstance> mig;        // slot order = MIG device index

  std::string pci_bus_id() const;         // "00000000:17:00.0" (nvmlPciInfo_t.busId)
  std::string pci_bus_id_legacy() const;  // "0000:17:00.0"
};

// Makes one NVML symbol (and its versioned variants) return `code`, on one GPU or all; with
// hang_ms, only after blocking that long with the library's lock held, as a driver stuck in
// an ioctl blocks every other NVML call of the process.
struct Fault {
  std::string call;
  int code = 0;
  std::optional<unsigned> gpu;
  unsigned hang_ms = 0;
};

struct Config {
  std::vector<Gpu> gpus;
  std::vector<Fault> faults;
};

// A GPU's knobs (flags, sensors, modes) under their config.json keys; `gpusim status --json`
// reports them under the same keys.
nlohmann::json gpu_knobs_json(const Gpu& g);

Result<Config> parse_config(const std::string& json_text);
std::string serialize_config(const Config& config);

Result<Config> load_config(const std::string& path);
Status save_config(const std::string& path, const Config& config);

// Whether a fault named `fault_call` applies to `symbol`: equal, or `symbol` is a versioned
// variant of it (X_v2, X_v3), or `fault_call` ends in '*' and prefixes `symbol`. A fault on
// nvmlInit also covers nvmlInitWithFlags (the same operation).
bool fault_matches(const std::string& fault_call, const char* symbol);

// The fault injected for `symbol` on `gpu` (nullopt = call without a device), if any.
const Fault* find_fault(const Config& config, const char* symbol, std::optional<unsigned> gpu);

}  // namespace gpusim
