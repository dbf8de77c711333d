// gpusim fault: make NVML symbols return chosen error codes, on one GPU or all.
#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <iterator>

#include "ctl/commands.hpp"
#include "ctl/ctl_common.hpp"

namespace gpusim::ctl {

namespace {

constexpr const char* kSymbols[] = {
#include "gpusim_symbols.inc"
};

// The name must designate at least one symbol some generation exports.
bool known_call(const std::string& call) {
  return std::any_of(std::begin(kSymbols), std::end(kSymbols),
                     [&](const char* s) { return fault_matches(call, s); });
}

}  // namespace

int run_fault(const Layout& layout, const FaultOptions& opts) {
  auto cfg = load_state_config(layout);
  if (!cfg.ok()) return fail(cfg.error().message);
  if (opts.clear) {
    // With --call and/or --gpu only the matching faults go; otherwise all of them.
    std::erase_if(cfg->faults, [&](const Fault& f) {
      if (!opts.call.empty() && f.call != opts.call) return false;
      if (opts.has_gpu && f.gpu != opts.gpu) return false;
      return true;
    });
  } else {
    if (opts.call.empty() || !opts.has_code) {
      return fail("fault needs --call SYMBOL --code N (or --clear)");
    }
    if (!known_call(opts.call)) {
      return fail(fmt::format("--call {}: no simulated driver exports such a symbol (a trailing * "
                              "matches a prefix, e.g. nvmlDeviceGetComputeRunningProcesses*)",
                              opts.call));
    }
    if (opts.code <= 0) return fail(fmt::format("--code {}: an NVML error code is 1..999", opts.code));
    if (opts.has_gpu) {
      if (auto st = check_gpu_index(*cfg, opts.gpu); !st.ok()) return fail(st.error().message);
    }
    Fault f{opts.call, opts.code, opts.has_gpu ? std::optional<unsigned>(opts.gpu) : std::nullopt, opts.hang_ms};
    // One fault per (call, gpu): a new code replaces the old one.
    std::erase_if(cfg->faults, [&](const Fault& x) { return x.call == f.call && x.gpu == f.gpu; });
    cfg->faults.push_back(std::move(f));
  }
  if (auto st = store_state_config(layout, *cfg); !st.ok()) return fail(st.error().message);
  return 0;
}

}  // namespace gpusim::ctl
