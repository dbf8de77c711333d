#include "cli/kill/kill_command.hpp"
#include "cli/common/option_limits.hpp"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <stdexcept>
#include <set>

#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/gpu_choice.hpp"
#include "cli/common/selection_checks.hpp"
#include "cli/common/snapshot_status.hpp"
#include "cli/common/terminal_io.hpp"
#include "text/duration.hpp"
#include "text/sanitize.hpp"
#include "text/terminal_style.hpp"
#include "text/terminal_width.hpp"
#include "audit/audit_log.hpp"
#include "kill/escalation.hpp"
#include "kill/interrupt_guard.hpp"
#include "kill/kill_config.hpp"
#include "kill/kill_execution.hpp"
#include "kill/kill_plan.hpp"
#include "cli/kill/kill_render.hpp"
#include "kill/kill_run.hpp"
#include "kill/memory_verification.hpp"
#include "kill/pid_ref.hpp"
#include "nvml/nvml_library.hpp"
#include "snapshot/snapshot.hpp"
#include "text/signal_names.hpp"

namespace gpureap {
namespace {

// More than one process, or another user's: a person confirms first (or passes --yes).
bool needs_confirmation(const KillPlan& plan, const KillOptions& options) {
  if (options.yes || options.dry_run) return false;
  std::size_t count = 0;
  bool other_user = false;
  const uid_t me = getuid();
  for (const auto& t : plan.targets) {
    if (!t.actionable()) continue;
    ++count;
    if (t.uid && *t.uid != me) other_user = true;
  }
  return count > 1 || other_user;
}

// Bounds of the time options (docs/exit-codes.md: a value outside is a usage error, exit 2).

std::string usage_check(KillOptions& options) {
  if (!options.empty_option.empty()) {
    return fmt::format("gpureap kill: {} was given an empty value (an unset variable?); nothing was signalled",
                       options.empty_option);
  }
  if (options.criteria.pids.empty() && !options.criteria.has_filters() && options.gpus.empty()) {
    return "gpureap kill: name what to end: PIDs, or --gpu, --user, --name, --container, --holders or --all";
  }
  for (pid_t pid : options.criteria.pids) {
    if (pid <= 0) return fmt::format("gpureap kill: {}: not a valid PID", pid);
  }
  if (auto error = check_user_names(options.criteria.users, "gpureap kill"); !error.empty()) return error;
  for (const std::string& error :
       {check_duration_option("--timeout", options.timeout, option_limits::kMaxSignalTimeoutSeconds, options.timeout_s),
        check_duration_option("--verify-timeout", options.verify_timeout, option_limits::kMaxVerifyTimeoutSeconds,
                              options.verify_timeout_s)}) {
    if (!error.empty()) return "gpureap kill: " + error + "; nothing was signalled";
  }
  return {};
}

}  // namespace

std::optional<std::string> signal_habit_as_option(std::string_view word) {
  if (word.size() < 2 || word[0] != '-' || word[1] == '-') return std::nullopt;
  const std::string signal(word.substr(1));
  // (No signal is named by one letter: -n, -y, -s, -w and -h stay kill's own flags.)
  if (!parse_signal(signal)) return std::nullopt;
  return "--signal=" + signal;
}

std::string misplaced_signal_hint(const std::vector<std::string>& words) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "--") break;
    // An option's value ("--timeout -5") is that option's to judge.
    if (word == "-s" || word == "--signal" || word == "--timeout" || word == "--verify-timeout" ||
        word == "--audit-log" || word == "--name" || word == "--color") {
      ++i;
      continue;
    }
    if (i == 0 || !signal_habit_as_option(word)) continue;  // first is where it belongs
    const std::string shown = sanitize_for_terminal(word);
    return fmt::format("gpureap kill: {}: a signal goes first, as in kill(1) (gpureap kill {} PID...), or use "
                       "--signal {}; nothing was signalled",
                       shown, shown, shown.substr(1));
  }
  return {};
}

CLI::App* add_kill_command(CLI::App& app, KillOptions& options) {
  CLI::App* kill = app.add_subcommand(
      "kill", "End GPU processes gracefully (SIGTERM, then SIGKILL), with their workers, and verify the memory was freed");
  kill->footer(
      "Targets: the PIDs named, plus the GPU processes matching every filter given (--gpu, --user,\n"
      "--name, --container; --all for every GPU process; --holders adds holders of the GPUs' device\n"
      "files whose job has provably ended, such as a killed job's workers; never a running job's). On AMD\n"
      "GPUs, which have no driver list, the GPU processes are ROCm jobs, by their /dev/kfd and KFD context (never a\n"
      "render or card node alone); --gpu takes any GPU's PCI address as well. By default each target's descendants\n"
      "that hold GPU device files or share its process group are included (--no-tree to turn off).\n"
      "Never signalled: PID <= 1, gpureap and its ancestors, kernel threads, driver PIDs whose\n"
      "identity is foreign or mismatch, and protected processes (display servers,\n"
      "nvidia-persistenced, nv-hostengine/DCGM, nvidia-smi: root-owned, by executable name; --protect\n"
      "adds names matched on the process name too; --force overrides protection only).\n\n"
      "Confirmation: without --yes, gpureap asks on the terminal (/dev/tty, even when output is piped)\n"
      "before signalling more than one process or another user's process. With no terminal at all\n"
      "(cron, setsid, a Slurm epilog) such a plan needs --yes: otherwise exit 10, nothing signalled.\n\n"
      "Exit status: 0 every target ended and the memory was verified free, 2 usage error,\n"
      "3/4 driver unavailable for a GPU selection, 6 a target survived or memory was not freed,\n"
      "7 permission denied, 8 a target was refused, 9 nothing matched, 10 not confirmed (declined, or no\n"
      "terminal to ask on without --yes), 128+signal interrupted while signalling (everything it had\n"
      "stopped was continued first).\n\n"
      "Configuration: $GPUREAP_CONFIG, else /etc/gpureap/config.toml: [kill] protect = [\"name\", ...],\n"
      "audit_log = \"/path\". Read only when it and its directory belong to root or you and nobody else\n"
      "may write them.\n\n"
      "Environment: GPUREAP_AUDIT_LOG (audit log path), GPUREAP_CONFIG, GPUREAP_NVML_LIBRARY, GPUREAP_DEV_DIR,\n"
      "NO_COLOR.");
  kill->add_option("pids", options.criteria.pids, "PIDs to end");
  // An empty value (`--gpu "$UNSET"`) would widen the selection: refused, never taken as absent.
  refuse_empty(kill->add_option("--gpu", options.gpus,
                                "Every GPU process on these GPUs: NVIDIA indices or UUIDs, any GPU's PCI address (comma-separated)"),
               options.empty_option);
  refuse_empty(kill->add_option("--user", options.criteria.users, "GPU processes of this user (name or uid)"),
               options.empty_option)
      ->delimiter(',');
  refuse_empty(kill->add_option("--name", options.criteria.name_regex,
                                "GPU processes whose command line matches this regular expression (RE2 syntax, at most 1024 bytes)"),
               options.empty_option);
  refuse_empty(kill->add_option("--container", options.criteria.containers,
                                "GPU processes in this container (id or pod UID prefix)"),
               options.empty_option)
      ->delimiter(',');
  kill->add_flag("--holders", options.criteria.holders,
                 "Also holders of the GPUs' device files whose job has ended (a killed job's workers)");
  kill->add_flag("--all", options.criteria.all, "Every GPU process");
  kill->add_flag("--no-tree", options.no_tree, "Do not include descendants");
  kill->add_flag("--group", options.criteria.group, "Signal each target's whole process group");
  kill->add_option("--signal,-s", options.signal,
                   "First signal (TERM, INT, HUP, ... or a number; default TERM; `gpureap kill -9 PID` as kill(1) also works)");
  kill->add_option("--timeout", options.timeout,
                   "Seconds to wait after the first signal before SIGKILL, 0 to 3600 (default 10; also 500ms, 2m)");
  kill->add_flag("--no-escalate", options.no_escalate, "Send only the first signal, never SIGKILL");
  kill->add_flag("--dry-run,-n", options.dry_run, "Show the plan and signal nothing");
  kill->add_flag("--yes,-y", options.yes, "Do not ask for confirmation");
  kill->add_flag("--json", options.json, "Machine-readable output (schema gpureap.kill/1, see docs/kill-json.md)");
  kill->add_option("--verify-timeout", options.verify_timeout,
                   "Seconds to wait for the driver to release the memory, 0 to 3600 (default 30)");
  kill->add_flag("--wide,-w", options.wide, "Show whole command lines on a terminal too (they always are through a pipe)");
  kill->add_flag("--no-verify", options.no_verify, "Do not wait for the memory release (the exit status then says nothing about it)");
  kill->add_flag("--reap-zombies", options.reap_zombies, "Send SIGCHLD to the parents of zombie targets");
  kill->add_flag("--force", options.force, "Also end protected processes (never overrides identity checks)");
  kill->add_option("--protect", options.protect, "Also protect processes with this name (comm or exe basename; NAME* for a prefix)");
  kill->add_option("--audit-log", options.audit_log, "Append one JSON line per signal to this file (mode 0600)");
  add_color_option(kill, options.color);
  return kill;
}

int run_kill(KillOptions options) {
  if (auto error = usage_check(options); !error.empty()) {
    std::cerr << error << "\n";
    return exit_code::kUsage;
  }
  options.criteria.tree = !options.no_tree;
  const auto first_signal = parse_signal(options.signal);
  if (!first_signal || *first_signal <= 0 || *first_signal >= 65) {
    std::cerr << fmt::format("gpureap kill: --signal {}: unknown signal (try TERM, INT, HUP, KILL or a number)\n",
                             sanitize_for_terminal(options.signal));
    return exit_code::kUsage;
  }
  const ColorChoice choice = parse_color_choice(options.color);
  const TerminalStyle style = TerminalStyle::for_fd(STDOUT_FILENO, options.json ? ColorChoice::Never : choice);

  std::string config_error;
  const auto config = load_kill_config(config_error);
  if (!config) {
    std::cerr << "gpureap kill: " << sanitize_for_terminal(config_error) << "\n";
    return exit_code::kUsage;
  }

  // The audit log first: if it cannot be written, nothing may be signalled.
  std::optional<AuditLog> audit;
  options.audit_log = audit_log_path(options.audit_log, *config);
  if (!options.audit_log.empty() && !options.dry_run) {
    std::string error;
    audit = AuditLog::open(options.audit_log, Requester::current(), error);
    if (!audit) {
      std::cerr << "gpureap kill: " << sanitize_for_terminal(error) << "; nothing was signalled\n";
      return exit_code::kUsage;
    }
  }

  SnapshotSource source(default_snapshot_options());
  auto snapshot = source.take();
  const auto driver_failure = [&] {
    return snapshot->driver.failure == LoadFailure::LibraryNotFound ? exit_code::kNoDriverLibrary
                                                                    : exit_code::kDriverInitFailed;
  };
  if (!options.gpus.empty()) {
    GpuChoiceError error;
    const auto gpus = resolve_gpu_choice(options.gpus, *snapshot, "--gpu", error);
    if (!gpus) {
      std::cerr << "gpureap kill: " << error.message << "\n";
      // An index while NVIDIA's library is missing is the driver's failure, where NVIDIA GPUs exist.
      return error.needs_nvidia_library && !snapshot->driver.no_nvidia_gpus() ? driver_failure() : exit_code::kUsage;
    }
    options.criteria.gpus.assign(gpus->nvidia.begin(), gpus->nvidia.end());
    options.criteria.drm_gpus.assign(gpus->drm.begin(), gpus->drm.end());
  }
  // NVIDIA's processes can be read only through its library: needed for --all, unless the host
  // has AMD or Intel GPUs (their ROCm jobs are selected without it) or no NVIDIA GPU at all.
  const bool nvidia_unread = !snapshot->driver.loaded && !snapshot->driver.no_nvidia_gpus();
  if (nvidia_unread && options.criteria.all && snapshot->drm.devices.empty()) {
    std::cerr << "gpureap kill: " << sanitize_for_terminal(snapshot->driver.message) << "\n";
    return driver_failure();
  }

  if (auto error = check_containers(snapshot->table, options.criteria.containers, "gpureap kill"); !error.empty()) {
    std::cerr << error << "\n";
    return exit_code::kUsage;
  }

  Selection selection;
  try {
    selection = select_targets(*snapshot, options.criteria);
  } catch (const std::invalid_argument& error) {
    std::cerr << fmt::format("gpureap kill: --name: {}\n", sanitize_for_terminal(error.what()));
    return exit_code::kUsage;
  }
  PlanPolicy policy = PlanPolicy::for_current_process(*snapshot);
  policy.force = options.force;
  for (const auto& name : config->protect) policy.protect.add(name);
  for (const auto& name : options.protect) policy.protect.add(name);
  const KillPlan plan = plan_selected(*snapshot, selection, policy, options.criteria.tree);

  KillReport report;
  report.settings.signal = signal_name(*first_signal);
  report.settings.timeout_s = options.timeout_s;
  report.settings.escalate = !options.no_escalate;
  report.settings.verify = !options.no_verify;
  if (nvidia_unread && options.criteria.all) {
    // --all went on for the AMD and Intel GPUs; what NVML would have listed is not in the plan.
    report.notes.push_back("NVIDIA GPUs not read, their processes not selected: " + snapshot->driver.message);
  }
  report.settings.dry_run = options.dry_run;
  report.settings.group = options.criteria.group;
  report.settings.tree = options.criteria.tree;

  if (plan.targets.empty()) {
    if (options.json) {
      write_out(kill_report_json(plan, report).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
    }
    std::string missing;
    for (pid_t pid : plan.missing) missing += (missing.empty() ? " (no such process: " : ", ") + std::to_string(pid);
    if (!missing.empty()) missing += ")";
    std::cerr << "gpureap kill: nothing matched the selection" << missing << "\n";
    if (nvidia_unread && options.criteria.all) {
      // Nothing on the AMD and Intel GPUs, and NVIDIA's could not be read: not "nothing matched".
      std::cerr << "gpureap kill: " << sanitize_for_terminal(snapshot->driver.message) << "\n";
      return driver_failure();
    }
    return exit_code::kNothingSelected;
  }

  std::map<pid_t, PinResult> pins = pin_targets(plan, *snapshot);

  const std::string plan_text = render_plan(plan, report.settings, style, OutputWidth::for_fd(STDOUT_FILENO, options.wide));
  if (!options.json) write_text(plan_text);
  report.targets = planned_outcomes(plan);

  if (options.dry_run) {
    if (options.json) write_out(kill_report_json(plan, report).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
    return kill_exit_status(report);
  }
  if (needs_confirmation(plan, options)) {
    // The plan went to stdout; when that is not the terminal, show it where the question is.
    const bool plan_seen = !options.json && stdout_is_terminal();
    const Answer answer = ask_on_terminal(plan_seen ? std::string() : plan_text, "Proceed?");
    if (answer == Answer::NoTerminal) {
      std::cerr << "gpureap kill: this plan ends more than one process or another user's, and there is no terminal "
                   "to ask for confirmation on: add --yes to proceed without asking, or --dry-run to only show the "
                   "plan; nothing was signalled\n";
      return exit_code::kAborted;
    }
    if (answer != Answer::Yes) {
      std::cerr << "gpureap kill: not confirmed; nothing was signalled\n";
      return exit_code::kAborted;
    }
  }

  // The ladder over the pinned targets, then the zombies' parents.
  ExecutionOptions execution;
  execution.engine.first_signal = *first_signal;
  execution.engine.timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000));
  execution.engine.escalate = !options.no_escalate;
  execution.engine.proc_root = snapshot->table.options().proc_root;
  execution.tree = options.criteria.tree;
  execution.group = options.criteria.group;
  execution.reap_zombies = options.reap_zombies;
  InterruptGuard interrupts;  // the command's own thread: Ctrl-C stops the ladder, never gpureap mid-step
  execution.engine.interruption = interrupts.interruption();
  try {
    execute_plan(plan, pins, *snapshot, policy, execution, audit ? &*audit : nullptr, report);
  } catch (const std::runtime_error& error) {
    // Only the audit log throws: stop rather than signal without a record.
    std::cerr << "gpureap kill: " << sanitize_for_terminal(error.what()) << "; stopped before sending further signals\n";
    return exit_code::kInternalError;
  }

  verify_after_kill(plan, source, *snapshot, options.verify_timeout_s, report);

  if (options.json) {
    write_out(kill_report_json(plan, report).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
  } else {
    write_text(render_results(plan, report, style));
  }
  return kill_exit_status(report);
}

}  // namespace gpureap
