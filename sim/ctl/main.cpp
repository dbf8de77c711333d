// gpusim: control program of the GPU simulator (docs/simulator.md).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "ctl/commands.hpp"
#include "ctl/ctl_common.hpp"

using namespace gpusim;
using namespace gpusim::ctl;

int main(int argc, char** argv) {
  CLI::App app{"gpusim: control the simulated NVIDIA driver (state in --state DIR or $GPUSIM_STATE_DIR)"};
  app.require_subcommand(1);
  app.fallthrough();  // --state is accepted after the subcommand too
  std::string state;
  app.add_option("--state", state, "simulator state directory (default: $GPUSIM_STATE_DIR)");

  InitOptions init;
  auto* init_cmd = app.add_subcommand("init", "create a fresh simulated machine (wipes allocations)");
  init_cmd->add_option("--gpus", init.gpus, "number of GPUs (default 1)");
  init_cmd->add_option("--memory", init.memory, "memory per GPU: bytes or KiB/MiB/GiB/TiB (default 80GiB)");
  init_cmd->add_option("--reserved", init.reserved, "driver-reserved memory per GPU (default 512MiB)");
  init_cmd->add_option("--name", init.name, "GPU product name (default \"NVIDIA H100 80GB HBM3\")");
  init_cmd->add_option("--minors", init.minors, "comma-separated /dev/nvidia<N> minors (default: the index)");
  init_cmd->add_option("--mig", init.mig, "GPU_INDEX:INSTANCES, enables MIG with that many instances")
      ->allow_extra_args(false);

  SetOptions set;
  auto* set_cmd = app.add_subcommand("set", "change a GPU's state: KEY=VALUE...");
  set_cmd->add_option("--gpu", set.gpu, "GPU index")->required();
  set_cmd->add_option("assignments", set.assignments,
                      "lost, no_permission, memory_not_available, persistence (0/1); temperature, "
                      "power_mw, util_gpu, util_mem, compute_mode, release_delay_ms (integers); "
                      "base_used (SIZE); name");

  FaultOptions fault;
  auto* fault_cmd = app.add_subcommand("fault", "make an NVML symbol return an error code");
  fault_cmd->add_option("--call", fault.call, "NVML symbol (versioned variants included; a trailing * matches a prefix)");
  auto* code_opt = fault_cmd->add_option("--code", fault.code, "nvmlReturn_t value to return");
  auto* gpu_opt = fault_cmd->add_option("--gpu", fault.gpu, "only calls on this GPU (default: all)");
  fault_cmd->add_flag("--clear", fault.clear, "remove faults (all, or those matching --call/--gpu)");
  fault_cmd->add_option("--hang-ms", fault.hang_ms, "block the call this long (lock held, as a stuck driver) before it fails")
      ->check(CLI::Range(0u, 3600000u));

  bool status_json = false;
  auto* status_cmd = app.add_subcommand("status", "show GPUs, memory, allocations and faults");
  status_cmd->add_flag("--json", status_json, "machine-readable output");

  FreeOptions free_opts;
  auto* free_cmd = app.add_subcommand("free", "drop allocations unconditionally (like a GPU reset)");
  free_cmd->add_flag("--all", free_opts.all, "every allocation");
  auto* free_gpu = free_cmd->add_option("--gpu", free_opts.gpu, "allocations on this GPU");

  ResetOptions reset;
  auto* reset_cmd = app.add_subcommand("reset", "reset GPUs like nvidia-smi -r: refuses while a process holds the device");
  auto* reset_gpu = reset_cmd->add_option("--gpu", reset.gpu, "GPU index (default: all)");
  reset_cmd->add_flag("--force", reset.force, "reset even while processes hold the device");

  DrmAddOptions drm_add;
  auto* drm_add_cmd = app.add_subcommand("drm-add", "add a simulated AMD or Intel GPU (DRM): sysfs, nodes, KFD");
  drm_add_cmd->add_option("--pci", drm_add.pci, "PCI address, 0000:03:00.0")->required();
  drm_add_cmd->add_option("--driver", drm_add.driver, "amdgpu (default), i915 or xe");
  drm_add_cmd->add_option("--vram", drm_add.vram, "VRAM total (default 16GiB)");
  drm_add_cmd->add_option("--driver-vram", drm_add.driver_vram, "VRAM the driver itself uses (default 128MiB)");
  drm_add_cmd->add_option("--card", drm_add.card, "cardN minor (default 1)");
  drm_add_cmd->add_option("--render", drm_add.render, "renderDM minor (default 128)");
  drm_add_cmd->add_option("--fdinfo", drm_add.fdinfo, "amdgpu's fdinfo: current (5.19+, default) or legacy (5.14-5.18)");
  drm_add_cmd->add_flag("--kfd", drm_add.kfd, "a ROCm (KFD) topology node and dev/kfd");
  drm_add_cmd->add_option("--xgmi-hive", drm_add.xgmi_hive, "XGMI hive id (hex)");
  drm_add_cmd->add_option("--release-delay-ms", drm_add.release_delay_ms,
                          "how long a closed client's VRAM stays in mem_info_vram_used");

  unsigned drm_period_ms = 20;
  auto* drm_driver_cmd = app.add_subcommand("drm-driver", "run the simulated DRM driver (until SIGTERM or the parent dies)");
  drm_driver_cmd->add_option("--period-ms", drm_period_ms, "cycle period (default 20)")->check(CLI::Range(1u, 10000u));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  auto layout = resolve_state(state);
  if (!layout.ok()) return fail(layout.error().message);
  if (init_cmd->parsed()) return run_init(*layout, init);
  if (set_cmd->parsed()) return run_set(*layout, set);
  if (fault_cmd->parsed()) {
    fault.has_code = code_opt->count() > 0;
    fault.has_gpu = gpu_opt->count() > 0;
    return run_fault(*layout, fault);
  }
  if (status_cmd->parsed()) return run_status(*layout, status_json);
  if (free_cmd->parsed()) {
    free_opts.has_gpu = free_gpu->count() > 0;
    return run_free(*layout, free_opts);
  }
  if (reset_cmd->parsed()) {
    reset.has_gpu = reset_gpu->count() > 0;
    return run_reset(*layout, reset);
  }
  if (drm_add_cmd->parsed()) return run_drm_add(*layout, drm_add);
  if (drm_driver_cmd->parsed()) return run_drm_driver(*layout, drm_period_ms);
  return fail("no subcommand");
}
