// gpusim free / reset: drop allocations the way a GPU reset would.
//
// `free` is unconditional (test cleanup, clearing --leak allocations). `reset` behaves like
// `nvidia-smi -r`: it refuses while any process still has the GPU's device file open.
#include <fmt/core.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <set>

#include "common/alloc_scan.hpp"
#include "common/clock.hpp"
#include "common/file_io.hpp"
#include "ctl/commands.hpp"
#include "ctl/ctl_common.hpp"

namespace gpusim::ctl {

namespace {

// Deletes every allocation on `gpu` (all GPUs when nullopt); returns how many.
Result<unsigned> drop_allocations(const Layout& layout, const Config& cfg, std::optional<unsigned> gpu) {
  auto views = scan_allocations(layout, cfg, realtime_ns());
  if (!views.ok()) return Error{views.error().message};
  unsigned n = 0;
  for (const auto& v : *views) {
    if (v.state == AllocState::Released || (gpu && v.rec.gpu != *gpu)) continue;
    delete_allocation_files(layout, v.rec.id);
    ++n;
  }
  // Stale stamps and temp files of contexts that vanished mid-scan.
  if (!gpu) {
    auto names = list_dir(layout.allocs_dir());
    if (names.ok()) {
      for (const auto& name : *names) {
        if (name != ".lock") ::unlink((layout.allocs_dir() + "/" + name).c_str());
      }
    }
  }
  return n;
}

// PIDs with an open descriptor on `path`, found the way fuser finds them.
std::set<unsigned> holders_of(const std::string& path) {
  std::set<unsigned> pids;
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return pids;
  auto procs = list_dir("/proc");
  if (!procs.ok()) return pids;
  for (const auto& p : *procs) {
    auto pid = parse_unsigned(p);
    if (!pid) continue;
    std::string fd_dir = "/proc/" + p + "/fd";
    auto fds = list_dir(fd_dir);
    if (!fds.ok()) continue;
    for (const auto& fd : *fds) {
      char target[PATH_MAX];
      ssize_t n = ::readlink((fd_dir + "/" + fd).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (path == target || std::string(resolved) == target) {
        pids.insert(static_cast<unsigned>(*pid));
        break;
      }
    }
  }
  return pids;
}

}  // namespace

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
      std::set<unsigned> pids = holders_of(dev);
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
