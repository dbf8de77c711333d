// nvidia-smi, simulated: `-r`/`--gpu-reset`, `--query-gpu` and `--query-compute-apps` against
// the simulator in $GPUSIM_STATE_DIR (docs/simulator.md). Tests put its directory first on
// PATH, so the product runs it exactly as it would run the real one.
#include <fmt/core.h>

#include "smi/smi.hpp"

using namespace gpusim::smi;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto req = parse_args(args);
  if (!req) {
    std::string joined;
    for (const auto& a : args) joined += (joined.empty() ? "" : " ") + a;
    fmt::print(stderr, "simulated nvidia-smi: unsupported arguments: {}\n", joined.empty() ? "(none)" : joined);
    return kExitInvalidArgument;
  }
  switch (req->mode) {
    case Mode::Reset: return run_reset(*req);
    case Mode::QueryGpu: return run_query_gpu(*req);
    case Mode::QueryComputeApps: return run_query_compute_apps(*req);
    case Mode::ProcessTable: return run_process_table(*req);
  }
  return kExitOther;
}
