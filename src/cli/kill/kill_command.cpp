#include "cli/kill/kill_command.hpp"
#include "cli/common/option_limits.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/gpu_choice.hpp"
#include "cli/common/json_value.hpp"
#include "cli/common/selection_checks.hpp"
#include "cli/common/signal_setup.hpp"
#include "cli/common/snapshot_status.hpp"
#include "cli/common/terminal_io.hpp"
#include "text/duration.hpp"
#include "text/sanitize.hpp"
#include "text/terminal_style.hpp"
#include "text/terminal_width.hpp"
#include "kill/interrupt_guard.hpp"
#include "kill/kill_plan.hpp"
#include "cli/kill/kill_render.hpp"
#include "kill/kill_run.hpp"
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
  if (const auto signal = parse_signal(options.signal); !signal || *signal <= 0 || *signal >= 65) {
    return fmt::format("gpureap kill: --signal {}: unknown signal (try TERM, INT, HUP, KILL or a number)",
                       sanitize_for_terminal(options.signal));
  }
  return {};
}

// Whether --all met a host whose NVIDIA GPUs could not be read: it goes on for the AMD and
// Intel GPUs, and says what NVML would have listed is not in the plan.
bool nvidia_unread_for_all(const KillOptions& options, const Snapshot& snapshot) {
  return options.criteria.all && !snapshot.driver.loaded && !snapshot.driver.no_nvidia_gpus();
}

// The processes the options select, --gpu resolved against the snapshot; nullopt after saying
// why on stderr, with the exit status in `status`.
std::optional<Selection> select_from_options(KillOptions& options, Snapshot& snapshot, int& status) {
  status = exit_code::kUsage;
  if (!options.gpus.empty()) {
    GpuChoiceError error;
    const auto gpus = resolve_gpu_choice(options.gpus, snapshot, "--gpu", error);
    if (!gpus) {
      std::cerr << "gpureap kill: " << error.message << "\n";
      status = gpu_choice_error_status(error, snapshot);
      return std::nullopt;
    }
    options.criteria.gpus.assign(gpus->nvidia.begin(), gpus->nvidia.end());
    options.criteria.drm_gpus.assign(gpus->drm.begin(), gpus->drm.end());
  }
  // NVIDIA's processes can be read only through its library: --all needs it, unless the host
  // has AMD or Intel GPUs (their ROCm jobs are selected without it).
  if (nvidia_unread_for_all(options, snapshot) && snapshot.drm.devices.empty()) {
    std::cerr << "gpureap kill: " << sanitize_for_terminal(snapshot.driver.message) << "\n";
    status = driver_failure_status(snapshot);
    return std::nullopt;
  }
  if (auto error = check_containers(snapshot.table, options.criteria.containers, "gpureap kill"); !error.empty()) {
    std::cerr << error << "\n";
    return std::nullopt;
  }
  try {
    return select_targets(snapshot, options.criteria);
  } catch (const std::invalid_argument& error) {
    std::cerr << fmt::format("gpureap kill: --name: {}\n", sanitize_for_terminal(error.what()));
    return std::nullopt;
  }
}

// How the ladder runs, from the options.
ExecutionOptions execution_from(const KillOptions& options, const Snapshot& snapshot) {
  ExecutionOptions execution;
  execution.engine.first_signal = *parse_signal(options.signal);
  execution.engine.timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000));
  execution.engine.escalate = !options.no_escalate;
  execution.engine.proc_root = snapshot.table.options().proc_root;
  execution.tree = options.criteria.tree;
  execution.group = options.criteria.group;
  execution.reap_zombies = options.reap_zombies;
  return execution;
}

// An empty plan: the JSON report when asked, and why nothing is signalled.
int nothing_matched(const KillPlan& plan, const KillReport& report, const KillOptions& options,
                    const Snapshot& snapshot) {
  if (options.json) write_out(json_document(kill_report_json(plan, report)));
  std::string missing;
  for (pid_t pid : plan.missing) missing += (missing.empty() ? " (no such process: " : ", ") + std::to_string(pid);
  if (!missing.empty()) missing += ")";
  std::cerr << "gpureap kill: nothing matched the selection" << missing << "\n";
  if (nvidia_unread_for_all(options, snapshot)) {
    // Nothing on the AMD and Intel GPUs, and NVIDIA's could not be read: not "nothing matched".
    std::cerr << "gpureap kill: " << sanitize_for_terminal(snapshot.driver.message) << "\n";
    return driver_failure_status(snapshot);
  }
  return exit_code::kNothingSelected;
}

// A person's yes where the plan needs one: nullopt to go on, else the exit status (declined,
// or no terminal to ask on).
std::optional<int> confirmation_refused(const KillPlan& plan, const KillOptions& options, const std::string& plan_text) {
  if (!needs_confirmation(plan, options)) return std::nullopt;
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
  return std::nullopt;
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
  const TerminalStyle style =
      TerminalStyle::for_fd(STDOUT_FILENO, options.json ? ColorChoice::Never : parse_color_choice(options.color));
  const auto setup = open_signal_setup("gpureap kill", options.audit_log, options.dry_run);
  if (!setup) return exit_code::kUsage;

  SnapshotSource source(default_snapshot_options());
  auto snapshot = source.take();
  int status = exit_code::kOk;
  const auto selection = select_from_options(options, *snapshot, status);
  if (!selection) return status;
  std::vector<std::string> protect = setup->config.protect;
  protect.insert(protect.end(), options.protect.begin(), options.protect.end());
  PreparedKill prepared =
      prepare_kill(*snapshot, *selection, kill_policy(*snapshot, protect, options.force), options.criteria.tree);
  const KillPlan& plan = prepared.plan;

  CarryOutOptions how{.execution = execution_from(options, *snapshot),
                      .verify_timeout_s = options.verify_timeout_s,
                      .audit = setup->audit_log()};
  KillReport report = planned_report(plan, how.execution);
  report.settings.timeout_s = options.timeout_s;
  report.settings.verify = !options.no_verify;
  report.settings.dry_run = options.dry_run;
  if (nvidia_unread_for_all(options, *snapshot)) {
    report.notes.push_back("NVIDIA GPUs not read, their processes not selected: " + snapshot->driver.message);
  }
  if (plan.targets.empty()) return nothing_matched(plan, report, options, *snapshot);

  const std::string plan_text = render_plan(plan, report.settings, style, OutputWidth::for_fd(STDOUT_FILENO, options.wide));
  if (!options.json) write_text(plan_text);
  if (options.dry_run) {
    if (options.json) write_out(json_document(kill_report_json(plan, report)));
    return kill_exit_status(report);
  }
  if (const auto refused = confirmation_refused(plan, options, plan_text)) return *refused;

  InterruptGuard interrupts;  // the command's own thread: Ctrl-C stops the ladder, never gpureap mid-step
  how.execution.engine.interruption = interrupts.interruption();
  try {
    carry_out_kill(prepared, source, *snapshot, how, report);
  } catch (const std::runtime_error& error) {
    // Only the audit log throws: stop rather than signal without a record.
    std::cerr << "gpureap kill: " << sanitize_for_terminal(error.what()) << "; stopped before sending further signals\n";
    return exit_code::kInternalError;
  }
  if (options.json) {
    write_out(json_document(kill_report_json(plan, report)));
  } else {
    write_text(render_results(plan, report, style));
  }
  return kill_exit_status(report);
}

}  // namespace gpureap
