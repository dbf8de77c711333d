// gpusim free / reset: drop allocations the way a GPU reset would.
//
// `free` is unconditional (test cleanup, clearing --leak allocations). `reset` behaves like
// `nvidia-smi -r`: it refuses while any process still has the GPU's device file open.
#include <fmt/core.h>

#include <set>

#include "common/gpu_reset.hpp"
#include "ctl/commands.hpp"
#include "ctl/ctl_common.hpp"

namespace gpusim::ctl {

int run_free(const Layout& layout, const FreeOptions& opts) {
  if (opts.all == opts.has_gpu) return fail("free needs exactly one of --all or --gpu I");
  auto cfg = load_state_config(layout);
  if (!cfg.ok()) return fail(cfg.error().message);
  if (opts.has_gpu) {
    if (auto st = check_gpu_index(*cfg, opts.gpu); !st.ok()) return fail(st.error().message);
  }
  auto n = drop_allocations(layout, *cfg, opts.has_gpu ? std::optional<unsigned>(opts.gpu) : std::nullopt);
  if (!n.ok()) return fail(n.error().message);
  fmt::print("gpusim: freed {} allocation(s)\n", *n);
  return 0;
}

int run_reset(const Layout& layout, const ResetOptions& opts) {
  auto cfg = load_state_config(layout);
  if (!cfg.ok()) return fail(cfg.error().message);
  std::vector<unsigned> gpus;
  if (opts.has_gpu) {
    if (auto st = check_gpu_index(*cfg, opts.gpu); !st.ok()) return fail(st.error().message);
    gpus.push_back(opts.gpu);
  } else {
    for (unsigned i = 0; i < cfg->gpus.size(); ++i) gpus.push_back(i);
  }
  if (!opts.force) {
    for (unsigned g : gpus) {
      std::string dev = layout.gpu_dev(cfg->gpus[g].minor);
      std::set<unsigned> pids = device_holders(dev);
      if (pids.empty()) continue;
      std::string list;
      for (unsigned pid : pids) list += (list.empty() ? "" : ", ") + std::to_string(pid);
      return fail(fmt::format("GPU {} ({}) is in use: {} held by PID(s) {}; stop them or use --force",
                              g, cfg->gpus[g].pci_bus_id(), dev, list));
    }
  }
  unsigned total = 0;
  for (unsigned g : gpus) {
    auto n = drop_allocations(layout, *cfg, g);
    if (!n.ok()) return fail(n.error().message);
    total += *n;
  }
  fmt::print("gpusim: reset {} GPU(s), freed {} allocation(s)\n", gpus.size(), total);
  return 0;
}

}  // namespace gpusim::ctl
