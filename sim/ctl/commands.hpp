// The `gpusim` subcommands. Each returns the process exit status (0 success, 1 failure) and
// reports its own errors on stderr.
#pragma once

#include <string>
#include <vector>

#include "common/layout.hpp"

namespace gpusim::ctl {

struct InitOptions {
  unsigned gpus = 1;
  std::string memory = "80GiB";
  std::string reserved = "512MiB";
  std::string name;                   // empty: kDefaultGpuName
  std::string minors;                 // "0,1,..."; empty: minor = index
  std::vector<std::string> mig;       // "GPU:INSTANCES"
};
int run_init(const Layout& layout, const InitOptions& opts);

struct SetOptions {
  unsigned gpu = 0;
  std::vector<std::string> assignments;  // KEY=VALUE
};
int run_set(const Layout& layout, const SetOptions& opts);

struct FaultOptions {
  std::string call;
  int code = 0;
  bool has_code = false;
  unsigned gpu = 0;
  bool has_gpu = false;
  bool clear = false;
  unsigned hang_ms = 0;
};
int run_fault(const Layout& layout, const FaultOptions& opts);

int run_status(const Layout& layout, bool json);

struct FreeOptions {
  bool all = false;
  unsigned gpu = 0;
  bool has_gpu = false;
};
int run_free(const Layout& layout, const FreeOptions& opts);

struct ResetOptions {
  unsigned gpu = 0;
  bool has_gpu = false;
  bool force = false;
};
int run_reset(const Layout& layout, const ResetOptions& opts);

struct DrmAddOptions {
  std::string pci;
  std::string driver = "amdgpu";
  std::string vram = "16GiB";
  std::string driver_vram = "128MiB";
  unsigned card = 1;
  unsigned render = 128;
  std::string fdinfo = "current";
  bool kfd = false;
  std::string xgmi_hive;
  unsigned release_delay_ms = 0;
};
int run_drm_add(const Layout& layout, const DrmAddOptions& opts);

// The simulated DRM driver's daemon (sim/drm/driver_loop.hpp); runs until SIGTERM.
int run_drm_driver(const Layout& layout, unsigned period_ms);

}  // namespace gpusim::ctl
