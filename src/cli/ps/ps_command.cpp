#include "cli/ps/ps_command.hpp"
#include "cli/common/option_limits.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/terminal_io.hpp"
#include "cli/ps/ps_json.hpp"
#include "cli/ps/ps_table.hpp"
#include "cli/common/selection_checks.hpp"
#include "cli/common/snapshot_status.hpp"
#include "snapshot/snapshot.hpp"
#include "text/duration.hpp"
#include "text/charset.hpp"
#include "text/sanitize.hpp"
#include "text/terminal_width.hpp"
#include "text/truncate.hpp"

namespace gpureap {
namespace {


volatile std::sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

// --gpu names GPUs the host must have; a typo should not silently show nothing. An NVIDIA index
// while NVIDIA's library is not loaded is the driver's failure: its exit status, as without --gpu.
std::optional<int> resolve_gpu_filter(const Snapshot& snapshot, PsOptions& options) {
  if (options.gpus.empty()) return std::nullopt;
  GpuChoiceError error;
  options.filter.gpus = resolve_gpu_choice(options.gpus, snapshot, "--gpu", error);
  if (options.filter.gpus) return std::nullopt;
  std::cerr << "gpureap ps: " << error.message << "\n";
  const int driver_status = snapshot_exit_status(snapshot);
  return error.needs_nvidia_library && driver_status != exit_code::kOk ? driver_status : exit_code::kUsage;
}

std::string render(const Snapshot& snapshot, const PsOptions& options, const TerminalStyle& style,
                   const OutputWidth& width) {
  if (options.json) return ps_to_json(snapshot, options.filter).dump(options.watch_seconds > 0 ? -1 : 2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return in_charset(options.tree ? render_ps_tree(snapshot, options.filter, style, width)
                                 : render_ps_table(snapshot, options.filter, style, width),
                    terminal_charset());
}

// stdout through stdio, flushed at once: each --watch frame appears whole.
void print_flushed(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// Sleeps until the interval passes or a stop signal arrives, or, with the kernel's events,
// until the holders change (a process opened a GPU device file, a holder forked or ended): the
// next frame shows it at once, yet frames come at most one per kMinWatchSeconds.
void wait_interval(double seconds, HolderEvents& events) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  const auto first_change =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(option_limits::kMinWatchSeconds));
  std::vector<pollfd> fds;
  for (const int fd : events.event_fds()) fds.push_back({fd, POLLIN, 0});
  for (auto now = Clock::now(); now < end && !g_stop; now = Clock::now()) {
    // At most 100 ms asleep at a time: a stop signal is seen within that.
    auto wake = std::min(end, now + std::chrono::milliseconds(100));
    const bool listen = !fds.empty() && now >= first_change;
    if (!fds.empty() && !listen) wake = std::min(wake, first_change);
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    const int ready = poll(listen ? fds.data() : nullptr, listen ? fds.size() : 0, static_cast<int>(std::max<long long>(ms, 1)));
    if (ready > 0 && events.changed_since_scan()) return;
  }
}

// Without the kernel's events every frame walks /proc: said once on stderr, or at the top of
// every frame of a screen that each frame clears.
std::string fallback_note(const Snapshot& snapshot, bool clear_screen, bool& told, const OutputWidth& width) {
  if (!snapshot.holder_events || snapshot.holder_events->active) return {};
  if (clear_screen) return fit_lines(width, snapshot.holder_events->fallback_reason, "", "  ");
  if (!told) std::cerr << "gpureap ps: " << sanitize_for_terminal(snapshot.holder_events->fallback_reason) << "\n";
  told = true;
  return {};
}

}  // namespace

CLI::App* add_ps_command(CLI::App& app, PsOptions& options) {
  CLI::App* ps = app.add_subcommand("ps", "Show every GPU process and every holder of a GPU device file");
  ps->footer(
      "Identity of a driver-listed PID: ok (holds that GPU's device file here), foreign (no such\n"
      "PID in this PID namespace), mismatch (that PID here is another process: never the GPU\n"
      "process), unverified (no permission to check, or an MPS client not tied to a listed\n"
      "server). MPS clients are tied to their server by the kernel's socket table.\n\n"
      "Exit status: 0 ok, 2 usage error, 3 no libnvidia-ml.so.1 (device-file holders still\n"
      "listed), 4 driver failed to initialise, 5 a GPU reported an error (others still listed).\n\n"
      "Environment: GPUREAP_NVML_LIBRARY (NVML library to load), GPUREAP_DEV_DIR (where the\n"
      "GPU device files are, default /dev), NO_COLOR.");
  ps->add_flag("--json", options.json, "Machine-readable output (schema gpureap.ps/1, see docs/ps-json.md)");
  ps->add_flag("--tree", options.tree, "Show each GPU process with its descendants and their roles");
  ps->add_option_function<std::string>(
      "--watch", [&options](const std::string& text) { options.watch = text; },
      "Refresh every SECONDS, from 0.1 to 86400 (1d), such as 2, 0.5 or 1m, and as root at once when a holder of "
      "a GPU device file comes or goes (with --json: one object per line)");
  ps->add_flag("--wide,-w", options.wide, "Show whole command lines on a terminal too (they always are through a pipe)");
  ps->add_option("--gpu", options.gpus, "Only these GPUs: NVIDIA indices or UUIDs, any GPU's PCI address (comma-separated)");
  ps->add_option("--user", options.filter.users, "Only processes of this user (name or uid)")->delimiter(',');
  ps->add_option("--pid", options.filter.pids, "Only these PIDs")->delimiter(',');
  ps->add_option("--container", options.filter.containers, "Only processes in this container (id or pod UID prefix)")
      ->delimiter(',');
  add_color_option(ps, options.color);
  return ps;
}

int run_ps(PsOptions options) {
  for (pid_t pid : options.filter.pids) {
    if (pid <= 0) {
      std::cerr << "gpureap ps: --pid " << pid << ": not a valid PID\n";
      return exit_code::kUsage;
    }
  }
  if (const std::string error = check_user_names(options.filter.users, "gpureap ps"); !error.empty()) {
    std::cerr << error << "\n";
    return exit_code::kUsage;
  }
  if (options.watch) {
    const std::string error = check_duration_option("--watch", *options.watch, option_limits::kMaxWatchSeconds,
                                                    options.watch_seconds, option_limits::kMinWatchSeconds);
    if (!error.empty()) {
      std::cerr << "gpureap ps: " << error << "\n";
      return exit_code::kUsage;
    }
  }
  const OutputWidth width = OutputWidth::for_fd(STDOUT_FILENO, options.wide);
  const ColorChoice choice = parse_color_choice(options.color);
  const TerminalStyle style = TerminalStyle::for_fd(STDOUT_FILENO, options.json ? ColorChoice::Never : choice);
  SnapshotOptions snapshot_options = default_snapshot_options();
  // ps shows holders and driver-listed trees only: no need to read every process in full.
  snapshot_options.proc.scope = ProcScanScope::Holders;
  snapshot_options.proc.descendants = options.tree;  // only the tree draws them
  // --watch keeps the holders from the kernel's events and walks /proc every 5 minutes; one
  // look walks (a set is worth keeping only across looks).
  const auto events = options.watch_seconds > 0 ? std::make_shared<HolderEvents>(300) : nullptr;
  snapshot_options.holder_events = events;
  SnapshotSource source(std::move(snapshot_options));

  if (options.watch_seconds <= 0) {
    auto snapshot = source.take();
    if (const auto failed = resolve_gpu_filter(*snapshot, options)) return *failed;
    if (auto error = check_containers(snapshot->table, options.filter.containers, "gpureap ps"); !error.empty()) {
      std::cerr << error << "\n";
      return exit_code::kUsage;
    }
    print_flushed(render(*snapshot, options, style, width));
    // The table already says it; JSON consumers get the reason on stderr as well.
    if (!snapshot->driver.loaded && !snapshot->driver.no_nvidia_gpus() && options.json) std::cerr << "gpureap: " << sanitize_for_terminal(snapshot->driver.message) << "\n";
    return snapshot_exit_status(*snapshot);
  }

  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  const bool clear_screen = !options.json && isatty(STDOUT_FILENO) == 1;
  int status = exit_code::kOk;
  bool first = true;  // a container that ends while watching is not a usage error
  bool fallback_told = false;
  while (!g_stop) {
    auto snapshot = source.take();
    if (const auto failed = resolve_gpu_filter(*snapshot, options)) return *failed;
    if (first) {
      if (auto error = check_containers(snapshot->table, options.filter.containers, "gpureap ps"); !error.empty()) {
        std::cerr << error << "\n";
        return exit_code::kUsage;
      }
    }
    first = false;
    std::string frame = fallback_note(*snapshot, clear_screen, fallback_told, width) +
                        render(*snapshot, options, style, width);
    if (clear_screen) frame = "\x1b[H\x1b[2J" + frame;
    print_flushed(frame);
    status = snapshot_exit_status(*snapshot);
    wait_interval(options.watch_seconds, *events);
  }
  return status;
}

}  // namespace gpureap
