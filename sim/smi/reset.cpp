// nvidia-smi -r [-i ID]: a GPU reset as the real tool performs it, against the simulator's
// state. It checks, in this order: root; the GPU is not lost; persistence mode is off (it
// counts as a client, NVIDIA/NVSentinel#1690); no process has the device file open. Only then
// does it drop the GPU's allocations, as `gpusim reset` does. It never loads NVML or opens a
// device file, so it cannot count itself as a holder.
#include <fmt/core.h>
#include <unistd.h>

#include <set>
#include <string_view>

#include "common/config.hpp"
#include "common/gpu_reset.hpp"
#include "common/layout.hpp"
#include "smi/smi.hpp"

namespace gpusim::smi {

namespace {

// nvmlErrorString's text for each refusal, as the real tool prints it after the bus id.
constexpr const char* kNoPermission = "Insufficient Permissions";
constexpr const char* kInUse = "In use by another client";
constexpr const char* kLost = "GPU is lost";

struct Refusal {
  std::string bus_id;
  const char* reason;
  int exit_status;
};

std::string in_use_advice(std::size_t n) {
  return fmt::format(
      "{} currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
      "application, graphics application such as an X server, or a monitoring application such "
      "as another instance of nvidia-smi). Please first kill all processes using {} and all "
      "compute applications running in the system.",
      n == 1 ? "1 device is" : fmt::format("{} devices are", n), n == 1 ? "this device" : "these devices");
}

int report(const std::vector<Refusal>& refusals) {
  fmt::print("The following GPUs could not be reset:\n");
  std::set<int> statuses;
  std::size_t in_use = 0;
  for (const Refusal& r : refusals) {
    fmt::print("  GPU {}: {}\n", r.bus_id, r.reason);
    statuses.insert(r.exit_status);
    if (std::string_view(r.reason) == kInUse) ++in_use;
  }
  if (in_use > 0) fmt::print("\n{}\n", in_use_advice(in_use));
  return statuses.size() == 1 ? *statuses.begin() : kExitOther;
}

}  // namespace

int run_reset(const Request& req) {
  auto dir = state_dir_from_env();
  auto config = dir ? load_config(Layout(*dir).config()) : Result<Config>(Error{"no state"});
  if (!config.ok()) {
    fmt::print("{}\n", kDriverNotLoadedMessage);
    return kExitDriverNotLoaded;
  }
  Layout layout(*dir);
  std::vector<unsigned> gpus;
  for (unsigned i = 0; i < config->gpus.size(); ++i) {
    const Gpu& g = config->gpus[i];
    if (!req.id || id_matches(*req.id, i, g.uuid, g.pci_bus_id())) gpus.push_back(i);
  }
  if (gpus.empty()) {
    fmt::print("No devices were found\n");
    return kExitNotFound;
  }

  // All or nothing: a refusal on any selected GPU resets none of them.
  std::vector<Refusal> refusals;
  for (unsigned i : gpus) {
    const Gpu& g = config->gpus[i];
    if (::geteuid() != 0) {
      refusals.push_back({g.pci_bus_id(), kNoPermission, kExitNoPermission});
    } else if (g.lost) {
      refusals.push_back({g.pci_bus_id(), kLost, kExitGpuIsLost});
    } else if (g.persistence || !device_holders(layout.gpu_dev(g.minor)).empty()) {
      refusals.push_back({g.pci_bus_id(), kInUse, kExitOther});
    }
  }
  if (!refusals.empty()) return report(refusals);

  for (unsigned i : gpus) {
    auto dropped = drop_allocations(layout, *config, i);
    if (!dropped.ok()) {
      fmt::print("Unable to reset GPU {}: Unknown Error ({})\n", config->gpus[i].pci_bus_id(),
                 dropped.error().message);
      return kExitOther;
    }
    fmt::print("GPU {} was successfully reset.\n", config->gpus[i].pci_bus_id());
  }
  fmt::print("All done.\n");
  return kExitOk;
}

}  // namespace gpusim::smi
