// gpusim-cuda: behaves like a CUDA application towards the simulated driver. It maps
// libcuda.so.1, opens the device files (inheritably, as CUDA does), creates its contexts,
// optionally forks workers that inherit everything, prints one READY line and idles until
// told to stop. With --nvml-client it loads the simulated NVML instead and allocates nothing.
#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>

#include "common/config.hpp"
#include "common/layout.hpp"
#include "cuda/contexts.hpp"
#include "cuda/cpu_use.hpp"
#include "cuda/libraries.hpp"
#include "cuda/mps_client.hpp"
#include "cuda/options.hpp"
#include "cuda/pidns.hpp"
#include "cuda/process_name.hpp"
#include "cuda/signals.hpp"
#include "cuda/workers.hpp"

using namespace gpusim;
using namespace gpusim::cuda;

static int die(const std::string& message, int status) {
  fmt::print(stderr, "gpusim-cuda: error: {}\n", message);
  return status;
}

int main(int argc, char** argv) {
  ParseOutcome parsed = parse_options(argc, argv);
  if (!parsed.options) return parsed.exit_status;
  Options opts = *parsed.options;
  adopt_process_name(opts.name, argc, argv);

  std::string state = opts.state;
  if (state.empty()) {
    auto env = state_dir_from_env();
    if (!env) return die("no state directory: pass --state DIR or set GPUSIM_STATE_DIR", kExitUsage);
    state = *env;
  }
  Layout layout(state);

  if (opts.pidns) {
    if (auto st = enter_pid_namespace(); !st.ok()) {
      return die(st.error().message + " (--pidns needs CAP_SYS_ADMIN or user namespaces)",
                 kExitNoPidNamespace);
    }
  }
  // Before anything can fork: signals sent from now on are never lost.
  install_signal_policy(opts.on_sigterm);

  auto config = load_config(layout.config());
  if (!config.ok()) {
    return die(fmt::format("no simulated driver in {} ({}): run `gpusim init` first", layout.root(),
                           config.error().message),
               kExitError);
  }
  auto owner = identify_self();
  if (!owner.ok()) return die(owner.error().message, kExitError);

  // The driver library first, as cuInit or nvmlInit would load it before touching a device.
  if (opts.nvml_client) {
    if (auto st = attach_as_nvml_client(layout.root()); !st.ok()) return die(st.error().message, kExitError);
  } else if (!opts.allocs.empty()) {
    if (auto st = load_libcuda(); !st.ok()) return die(st.error().message, kExitError);
  }

  // cuInit: a running MPS control daemon takes the program's contexts into its server.
  std::optional<MpsSession> mps;
  if (!opts.allocs.empty()) {
    int mps_status = kExitError;
    auto joined = join_mps(&mps_status);
    if (!joined.ok()) return die(joined.error().message, mps_status);
    mps = *joined;
  }
  if (mps) {
    if (opts.workers > 0 || opts.zombie_child) {
      return die("MPS clients with --workers or --zombie-child are not simulated", kExitUsage);
    }
    opts.mps_server_pid = mps->server_pid;
    for (AllocSpec& a : opts.allocs) {
      if (a.type == ProcType::Compute) a.type = ProcType::Mps;
    }
  }

  AttachError err;
  auto device_fds = open_device_files(layout, *config, opts, &err);
  if (!device_fds.ok()) return die(err.message, err.exit_status);
  auto contexts = create_contexts(layout, *config, opts, *owner, &err);
  if (!contexts.ok()) return die(err.message, err.exit_status);

  if (opts.zombie_child) {
    if (auto st = fork_zombie(); !st.ok()) return die(st.error().message, kExitError);
  }
  auto workers = fork_workers(opts.workers, opts.worker_mode, opts.workers_on_sigterm);
  if (!workers.ok()) return die(workers.error().message, kExitError);

  std::string worker_list;
  std::vector<pid_t> unreaped;
  for (const Worker& w : *workers) {
    worker_list += (worker_list.empty() ? "" : ",") + std::to_string(w.host_pid);
    unreaped.push_back(w.pid);
  }
  // After the workers' fork: the spinning thread is this process's alone.
  start_cpu_use(opts.cpu_percent);
  fmt::print("READY pid={} nspid={} workers={}\n", owner->host_pid, owner->ns_pid, worker_list);
  std::fflush(stdout);

  if (mps) return mps_client_life(*mps, opts, *contexts);
  // Descriptors and locks stay open until the process ends, however it ends.
  const int status = idle_until_done(opts.on_sigterm, opts.exit_after_ms, unreaped);
  if (opts.workers_at_exit == WorkersAtExit::Join) join_workers(unreaped);
  return status;
}
