// gpusim init: a fresh simulated machine. Wipes allocations and device files of a previous
// run, like a reboot; processes still running from before keep descriptors to unlinked files.
#include <fmt/core.h>

#include <set>
#include <sstream>

#include "common/file_io.hpp"
#include "common/size.hpp"
#include "ctl/commands.hpp"
#include "ctl/ctl_common.hpp"
#include "ctl/topology.hpp"

namespace gpusim::ctl {

static Result<std::vector<unsigned>> parse_minors(const std::string& text, unsigned gpus) {
  std::vector<unsigned> minors;
  if (text.empty()) {
    for (unsigned i = 0; i < gpus; ++i) minors.push_back(i);
    return minors;
  }
  std::stringstream ss(text);
  std::string item;
  std::set<unsigned> seen;
  while (std::getline(ss, item, ',')) {
    auto v = parse_unsigned(item);
    if (!v || *v > 254) return Error{fmt::format("--minors: '{}' is not a minor number 0..254", item)};
    if (!seen.insert(static_cast<unsigned>(*v)).second) {
      return Error{fmt::format("--minors: minor {} given twice", *v)};
    }
    minors.push_back(static_cast<unsigned>(*v));
  }
  if (minors.size() != gpus) {
    return Error{fmt::format("--minors lists {} minor(s) for {} GPU(s)", minors.size(), gpus)};
  }
  return minors;
}

static Status create_device_files(const Layout& layout, const Config& config) {
  if (auto st = remove_tree(layout.dev_dir()); !st.ok()) return st;
  if (auto st = make_dir(layout.dev_dir(), 0755); !st.ok()) return st;
  if (auto st = make_dir(layout.caps_dir(), 0755); !st.ok()) return st;
  std::vector<std::string> files = {layout.dev("nvidiactl"), layout.dev("nvidia-uvm"),
                                    layout.dev("nvidia-uvm-tools"), layout.dev("nvidia-modeset")};
  for (const Gpu& g : config.gpus) {
    files.push_back(layout.gpu_dev(g.minor));
    for (const MigInstance& m : g.mig) {
      files.push_back(layout.cap_dev(m.cap_gi_minor));
      files.push_back(layout.cap_dev(m.cap_ci_minor));
    }
  }
  for (const auto& f : files) {
    if (auto st = make_device_file(f, 0666); !st.ok()) return st;
  }
  return ok_status();
}

int run_init(const Layout& layout, const InitOptions& opts) {
  if (opts.gpus > kMaxGpus) return fail(fmt::format("--gpus {}: at most {} GPUs", opts.gpus, kMaxGpus));
  auto memory = parse_size(opts.memory);
  if (!memory.ok()) return fail("--memory: " + memory.error().message);
  auto reserved = parse_size(opts.reserved);
  if (!reserved.ok()) return fail("--reserved: " + reserved.error().message);
  if (*memory == 0) return fail("--memory must be larger than 0");
  if (*reserved >= *memory) {
    return fail(fmt::format("--reserved {} leaves no memory on a {} GPU", format_size(*reserved),
                            format_size(*memory)));
  }
  auto minors = parse_minors(opts.minors, opts.gpus);
  if (!minors.ok()) return fail(minors.error().message);

  Config config;
  std::string name = opts.name.empty() ? kDefaultGpuName : opts.name;
  for (unsigned i = 0; i < opts.gpus; ++i) {
    config.gpus.push_back(make_gpu(i, (*minors)[i], name, *memory, *reserved));
  }
  std::set<unsigned> mig_gpus;
  for (const std::string& spec : opts.mig) {
    auto colon = spec.find(':');
    auto gpu = parse_unsigned(spec.substr(0, colon));
    auto count = colon == std::string::npos ? std::nullopt : parse_unsigned(spec.substr(colon + 1));
    if (!gpu || !count) return fail(fmt::format("--mig '{}': expected GPU_INDEX:INSTANCES, e.g. 0:3", spec));
    if (*gpu >= opts.gpus) {
      return fail(fmt::format("--mig '{}': there is no GPU {} (--gpus {})", spec, *gpu, opts.gpus));
    }
    if (*count < 1 || *count > kMaxMigSlots) {
      return fail(fmt::format("--mig '{}': a GPU holds 1 to {} MIG instances", spec, kMaxMigSlots));
    }
    if (!mig_gpus.insert(static_cast<unsigned>(*gpu)).second) {
      return fail(fmt::format("--mig: GPU {} given twice", *gpu));
    }
    make_mig_instances(config.gpus[*gpu], static_cast<unsigned>(*gpu), static_cast<unsigned>(*count));
  }

  // The root may be a mkdtemp directory; only create it, never loosen its mode.
  if (auto st = make_dir_if_missing(layout.root()); !st.ok()) return fail(st.error().message);
  // allocs/ is world-writable: any user's NVML client may stamp and reap released contexts.
  if (auto st = remove_tree(layout.allocs_dir()); !st.ok()) return fail(st.error().message);
  if (auto st = make_dir(layout.allocs_dir(), 0777); !st.ok()) return fail(st.error().message);
  if (auto st = create_device_files(layout, config); !st.ok()) return fail(st.error().message);
  if (auto st = store_state_config(layout, config); !st.ok()) return fail(st.error().message);

  fmt::print("gpusim: initialised {} GPU(s) of {} in {}\n", opts.gpus, format_size(*memory),
             layout.root());
  return 0;
}

}  // namespace gpusim::ctl
