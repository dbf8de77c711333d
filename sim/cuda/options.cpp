#include "cuda/options.hpp"

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <charconv>

#include "common/size.hpp"

namespace gpusim::cuda {

static std::optional<unsigned long long> to_unsigned(const std::string& s) {
  unsigned long long v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

Result<AllocSpec> parse_alloc_spec(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    auto colon = text.find(':', start);
    parts.push_back(text.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  auto bad = [&](const std::string& why) {
    return Error{fmt::format("--alloc '{}': {} (expected GPU:SIZE[:TYPE[:GI]], e.g. 0:2GiB:C)", text, why)};
  };
  if (parts.size() < 2 || parts.size() > 4) return bad("wrong number of fields");
  AllocSpec spec;
  auto gpu = to_unsigned(parts[0]);
  if (!gpu || *gpu > 1000) return bad("GPU must be an index");
  spec.gpu = static_cast<unsigned>(*gpu);
  auto size = parse_size(parts[1]);
  if (!size.ok()) return bad(size.error().message);
  if (*size == 0) return bad("size must be larger than 0");
  spec.bytes = *size;
  if (parts.size() >= 3) {
    auto type = proc_type_from_letter(parts[2]);
    if (!type) return bad("TYPE is C (compute), G (graphics) or M (MPS client)");
    spec.type = *type;
  }
  if (parts.size() == 4) {
    auto gi = to_unsigned(parts[3]);
    if (!gi || *gi > 1000) return bad("GI must be a MIG GPU-instance id");
    spec.gi = static_cast<unsigned>(*gi);
  }
  return spec;
}

Result<TermPolicy> parse_term_policy(const std::string& text, bool allow_slow) {
  if (text == "exit") return TermPolicy{TermPolicy::Exit, 0};
  if (text == "ignore") return TermPolicy{TermPolicy::Ignore, 0};
  if (allow_slow && text.rfind("slow:", 0) == 0) {
    auto ms = to_unsigned(text.substr(5));
    if (ms && *ms <= 3600000) return TermPolicy{TermPolicy::Slow, static_cast<unsigned>(*ms)};
  }
  return Error{fmt::format("'{}': expected exit, ignore{}", text, allow_slow ? " or slow:MS" : "")};
}

ParseOutcome parse_options(int argc, char** argv) {
  CLI::App app{"gpusim-cuda: a process that holds simulated GPU memory the way a CUDA program does"};
  Options o;
  std::vector<std::string> allocs;
  std::string mps_on_terminate = "exit";
  std::string worker_mode = "survive", workers_at_exit = "leave", on_sigterm = "exit", workers_on_sigterm = "exit";
  std::uint64_t release_delay = 0, exit_after = 0;
  app.add_option("--state", o.state, "simulator state directory (default: $GPUSIM_STATE_DIR)");
  app.add_option("--alloc", allocs, "GPU:SIZE[:TYPE[:GI]]; TYPE C (default), G or M; GI = MIG GPU instance")
      ->allow_extra_args(false);
  app.add_option("--workers", o.workers, "fork N workers that inherit every descriptor")
      ->check(CLI::Range(0u, 256u));
  app.add_option("--worker-mode", worker_mode, "survive (default) or die-with-parent");
  app.add_option("--workers-at-exit", workers_at_exit, "leave (default) or join: end and reap them on a normal exit");
  app.add_option("--on-sigterm", on_sigterm, "exit (default), ignore or slow:MS");
  app.add_option("--workers-on-sigterm", workers_on_sigterm, "exit (default) or ignore");
  app.add_flag("--pidns", o.pidns, "run inside a new PID namespace (like a container)");
  auto* delay_opt = app.add_option("--release-delay", release_delay,
                                   "ms the driver takes to free the memory once nobody holds it");
  app.add_flag("--leak", o.leak, "the memory is never freed (until gpusim free/reset)");
  app.add_flag("--nvml-client", o.nvml_client, "hold nvidiactl and the GPU devices, allocate nothing");
  app.add_flag("--zombie-child", o.zombie_child, "leave a child that exited and is never waited for");
  app.add_option("--sm-util", o.sm_util, "SM utilization % in per-process samples")->check(CLI::Range(0u, 100u));
  app.add_option("--mem-util", o.mem_util, "memory utilization % in per-process samples")
      ->check(CLI::Range(0u, 100u));
  app.add_option("--cpu-percent", o.cpu_percent, "use about this % of a core (a data loader at work), 0 to 90")
      ->check(CLI::Range(0u, 90u));
  auto* exit_opt = app.add_option("--exit-after", exit_after, "exit normally after MS milliseconds");
  app.add_option("--name", o.name, "process name (comm and argv[0])");
  app.add_option("--mps-on-terminate", mps_on_terminate,
                 "under MPS, after terminate_client: exit (default) or stay (alive, without GPU memory)");

  ParseOutcome out;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    out.exit_status = app.exit(e);
    return out;
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    out.exit_status = kExitUsage;
    return out;
  }
  auto usage = [&](const std::string& msg) {
    fmt::print(stderr, "gpusim-cuda: error: {}\n", msg);
    out.exit_status = kExitUsage;
    return out;
  };
  for (const auto& a : allocs) {
    auto spec = parse_alloc_spec(a);
    if (!spec.ok()) return usage(spec.error().message);
    o.allocs.push_back(*spec);
  }
  if (worker_mode == "survive") {
    o.worker_mode = WorkerMode::Survive;
  } else if (worker_mode == "die-with-parent") {
    o.worker_mode = WorkerMode::DieWithParent;
  } else {
    return usage("--worker-mode: expected survive or die-with-parent");
  }
  if (workers_at_exit == "leave") {
    o.workers_at_exit = WorkersAtExit::Leave;
  } else if (workers_at_exit == "join") {
    o.workers_at_exit = WorkersAtExit::Join;
  } else {
    return usage("--workers-at-exit: expected leave or join");
  }
  if (mps_on_terminate == "exit") {
    o.mps_on_terminate = MpsOnTerminate::Exit;
  } else if (mps_on_terminate == "stay") {
    o.mps_on_terminate = MpsOnTerminate::Stay;
  } else {
    return usage("--mps-on-terminate: expected exit or stay");
  }
  auto term = parse_term_policy(on_sigterm, true);
  if (!term.ok()) return usage("--on-sigterm " + term.error().message);
  o.on_sigterm = *term;
  auto wterm = parse_term_policy(workers_on_sigterm, false);
  if (!wterm.ok()) return usage("--workers-on-sigterm " + wterm.error().message);
  o.workers_on_sigterm = *wterm;
  if (delay_opt->count() > 0) o.release_delay_ms = release_delay;
  if (exit_opt->count() > 0) o.exit_after_ms = exit_after;
  // The join would wait forever, as multiprocessing's join would.
  if (o.workers_at_exit == WorkersAtExit::Join && o.workers_on_sigterm.kind == TermPolicy::Ignore) {
    return usage("--workers-at-exit join: the workers must not ignore SIGTERM (--workers-on-sigterm ignore)");
  }
  if (o.nvml_client && !o.allocs.empty()) return usage("--nvml-client allocates nothing: drop --alloc");
  if (o.name.size() > 200) return usage("--name: at most 200 characters");
  out.options = std::move(o);
  return out;
}

}  // namespace gpusim::cuda
