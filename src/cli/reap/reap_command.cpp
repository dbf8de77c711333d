#include "cli/reap/reap_command.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/gpu_choice.hpp"
#include "cli/common/json_value.hpp"
#include "cli/common/signal_setup.hpp"
#include "cli/common/snapshot_status.hpp"
#include "cli/kill/kill_render.hpp"
#include "cli/common/option_limits.hpp"
#include "cli/reap/reap_render.hpp"
#include "cli/common/selection_checks.hpp"
#include "cli/common/terminal_io.hpp"
#include "kill/cgroup_kill.hpp"
#include "kill/interrupt_guard.hpp"
#include "kill/tree_sweep.hpp"
#include "kill/kill_run.hpp"
#include "reap/reap.hpp"
#include "snapshot/snapshot.hpp"
#include "text/duration.hpp"
#include "text/sanitize.hpp"
#include "text/terminal_style.hpp"
#include "text/terminal_width.hpp"

namespace gpureap {
namespace {

constexpr const char* kReapCommand = "gpureap reap";

std::string usage_check(ReapOptions& options) {
  if (!options.empty_option.empty()) {
    return fmt::format("gpureap reap: {} was given an empty value (an unset variable?); nothing was signalled",
                       options.empty_option);
  }
  const bool owner = !options.cgroup.empty() || !options.users.empty() || !options.uids.empty();
  if (!owner && !options.gpus.empty()) {
    return "gpureap reap: --gpus alone does not prove whose process it is: add --cgroup (the job's cgroup) or "
           "--user/--uid (the job's owner); nothing was signalled";
  }
  if (!owner) return "gpureap reap: name what the job owns: --cgroup PATH, or --user/--uid (narrowed by --gpus)";
  if (auto error = check_user_names(options.users, kReapCommand); !error.empty()) return error;
  for (const auto& uid : options.uids) {
    if (uid.empty() || uid.size() > 10 || !std::all_of(uid.begin(), uid.end(), [](unsigned char c) { return c >= '0' && c <= '9'; }) ||
        !resolve_user(uid)) {
      return fmt::format("gpureap reap: --uid {}: not a numeric uid", sanitize_for_terminal(uid.substr(0, 64)));
    }
  }
  for (const std::string& error :
       {check_duration_option("--kill-timeout", options.kill_timeout, option_limits::kMaxSignalTimeoutSeconds,
                              options.kill_timeout_s),
        check_duration_option("--verify-timeout", options.verify_timeout, option_limits::kMaxVerifyTimeoutSeconds,
                              options.verify_timeout_s),
        options.baseline_mib.empty()
            ? std::string()
            : check_number_option("--baseline-mib", options.baseline_mib, option_limits::kMaxToleranceMib, "MiB",
                                  options.baseline_mib_value)}) {
    if (!error.empty()) return "gpureap reap: " + error + "; nothing was signalled";
  }
  for (const auto& name : options.except) {
    if (name.empty()) return "gpureap reap: --except needs a process name";
  }
  return {};
}

std::set<uid_t> owner_uids(const ReapOptions& options) {
  std::set<uid_t> uids;
  for (const auto& u : options.users) uids.insert(*resolve_user(u));
  for (const auto& u : options.uids) uids.insert(*resolve_user(u));
  return uids;
}

// Another user's processes cannot all be seen (their descriptors, so their device files) nor
// signalled without root: their GPUs would be called back to baseline on what was hidden.
int check_owner_uids(const ReapCriteria& criteria) {
  if (!criteria.uids || ::geteuid() == 0) return exit_code::kOk;
  for (uid_t uid : *criteria.uids) {
    if (uid == ::geteuid()) continue;
    std::cerr << fmt::format("gpureap reap: uid {}'s processes can be ended only by root (gpureap runs as uid {}); "
                             "nothing was signalled\n",
                             uid, ::geteuid());
    return exit_code::kPermissionDenied;
  }
  return exit_code::kOk;
}

// --cgroup: its directory, and its members read before the snapshot so that each of them is in
// it, every one of them ours to signal (or we are root).
int read_cgroup(const std::string& option, const std::string& proc_root, ReapCriteria& criteria) {
  std::string error;
  const std::string dir = resolve_cgroup_dir(option, proc_root, error);
  if (dir.empty()) {
    std::cerr << "gpureap reap: " << sanitize_for_terminal(error) << "; nothing was signalled\n";
    return exit_code::kUsage;
  }
  criteria.cgroup_dir = dir;
  const auto members = cgroupfs::read_subtree_pids(dir);
  if (!members) {
    std::cerr << "gpureap reap: --cgroup " << sanitize_for_terminal(dir)
              << ": cannot read its cgroup.procs (run as root); nothing was signalled\n";
    return exit_code::kPermissionDenied;
  }
  criteria.cgroup_pids = *members;
  // kill(pid, 0) sends nothing: it asks the kernel whether we may signal that process.
  for (pid_t pid : *members) {
    if (::kill(pid, 0) != 0 && errno == EPERM) {
      std::cerr << "gpureap reap: --cgroup " << sanitize_for_terminal(dir)
                << fmt::format(": PID {} in it belongs to another user and gpureap may not signal it (run as root); "
                               "nothing was signalled\n",
                               pid);
      return exit_code::kPermissionDenied;
    }
  }
  return exit_code::kOk;
}

// --gpus: the GPUs it names narrow the criteria; else the exit status, after saying why.
int resolve_gpus(const std::string& option, const Snapshot& snapshot, ReapCriteria& criteria) {
  GpuChoiceError error;
  auto gpus = resolve_gpu_choice({option}, snapshot, "--gpus", error);
  if (!gpus) {
    std::cerr << "gpureap reap: " << error.message << "; nothing was signalled\n";
    return gpu_choice_error_status(error, snapshot);
  }
  criteria.gpus = std::move(gpus->nvidia);
  criteria.drm_gpus = std::move(gpus->drm);
  return exit_code::kOk;
}

// The cgroup's PIDs were read before the pins: each pinned one is shown in the cgroup again
// through its pin, or it is a stranger that took a member's PID and is left alone.
void unpin_strangers(std::map<pid_t, PinResult>& pins, const std::string& proc_root, const std::string& cgroup_dir) {
  for (auto& [pid, pin] : pins) {
    if (pin.status == PinStatus::Ok && !sweep::pinned_in_cgroup(proc_root, pin.ref, cgroup_dir)) {
      pin = PinResult{PinStatus::IdentityChanged, 0, {}};
    }
  }
}

// Each GPU back to its baseline (NVIDIA's through the driver, AMD's and Intel's through their
// clients), after the ladder; with a survivor, one reading says where they stand.
void verify_gpus(const ReapOptions& options, const ReapSelection& selected, const KillPlan& plan,
                 SnapshotSource& source, const Snapshot& snapshot, ReapReport& report) {
  if (report.kill.interrupted_by != 0) return;
  const bool survivor = !report.survivors.empty();
  const std::set<unsigned> to_verify = report.criteria.gpus ? *report.criteria.gpus : selected.gpus_used;
  if (!to_verify.empty() && !snapshot.driver.loaded) {
    report.driver_unreadable = true;
    report.kill.notes.push_back("GPU memory not verified: " + snapshot.driver.message);
  } else if (!to_verify.empty()) {
    std::vector<ReapGpuCheck> checks;
    for (unsigned index : to_verify) {
      ReapGpuCheck check{.index = index};
      if (options.baseline_mib_value >= 0) {
        check.baseline_override = static_cast<std::uint64_t>(options.baseline_mib_value * 1024 * 1024);
      }
      checks.push_back(check);
    }
    ReapVerifyOptions verify;
    verify.timeout = std::chrono::milliseconds(survivor ? 0 : static_cast<long long>(options.verify_timeout_s * 1000));
    report.gpus = verify_baseline(checks, selected.listed_pids, [&source]() { return source.read_driver_only(); },
                                  verify);
  }
  verify_drm_after_kill(plan, source, options.verify_timeout_s, survivor, {}, report.kill);
}

void write_plan(const ReapOptions& options, const KillPlan& plan, const KillSettings& settings,
                const TerminalStyle& style) {
  if (plan.targets.empty()) {
    write_text(style.bold(fmt::format("{}Nothing of the job is running", options.dry_run ? "[dry run] " : "")) + "\n");
  } else {
    write_text(render_plan(plan, settings, style, OutputWidth::for_fd(STDOUT_FILENO, options.wide)));
  }
}

void write_report(const ReapOptions& options, const KillPlan& plan, const ReapReport& report, int status,
                  const TerminalStyle& style) {
  if (options.json) {
    write_out(json_document(reap_report_json(plan, report, status)));
    return;
  }
  if (!options.dry_run && !plan.targets.empty()) write_text(render_results(plan, report.kill, style));
  write_text(render_reap_outcome(report, style));
}

}  // namespace

CLI::App* add_reap_command(CLI::App& app, ReapOptions& options) {
  CLI::App* reap = app.add_subcommand(
      "reap", "Job-end cleanup (Slurm epilog, Kubernetes, cron): end what a job owns and verify its GPUs are empty");
  reap->footer(
      "Ownership is required: --cgroup (every process in that cgroup v2 subtree) or --user/--uid (that\n"
      "user's GPU processes: listed by the driver or holding an NVIDIA device file, so forked workers\n"
      "count; never their shell, never another user's: the real uid decides). --gpus narrows either to\n"
      "the processes using those GPUs; --gpus alone is refused (a GPU does not prove whose process it is).\n"
      "gpureap and its ancestors are never selected; --except spares processes by name. No confirmation\n"
      "is asked: the cgroup or the user is the proof.\n\n"
      "Each match gets the kill ladder (SIGTERM, SIGKILL after --kill-timeout; pidfd-pinned, audited).\n"
      "Then every selected GPU (without --gpus: every GPU the matches used) must show none of the job's\n"
      "processes and its used memory, less what processes outside the job hold, at most the baseline\n"
      "(default: 64 MiB + 16 MiB per other process, plus an allowance for the driver's reservation\n"
      "when it reports only v1 figures), within --verify-timeout.\n\n"
      "Exit status: 0 everything ended and every GPU verified back to its baseline (also when nothing\n"
      "matched), 2 usage error (no owner, unknown user, GPU or cgroup, bad value), 3/4 the driver\n"
      "could not be read to verify the GPUs, 6 something remains (survivors with state and wchan, or\n"
      "memory above the baseline), 7 permission denied (also --user naming another user, or a --cgroup\n"
      "holding a process gpureap may not signal, when not root: nothing is signalled), 8 a target was\n"
      "refused (protected process),\n"
      "128+signal interrupted while signalling.\n\n"
      "Configuration: as kill ([kill] protect, audit_log). Environment: GPUREAP_AUDIT_LOG, GPUREAP_CONFIG,\n"
      "GPUREAP_NVML_LIBRARY, GPUREAP_DEV_DIR, NO_COLOR.");
  std::string& empty = options.empty_option;
  refuse_empty(reap->add_option("--cgroup", options.cgroup,
                                "The job's cgroup v2 directory (absolute, or relative to the cgroup v2 mount); its subtree counts"),
               empty);
  refuse_empty(reap->add_option("--user", options.users, "The job's owner (name or uid): that user's GPU processes"), empty)
      ->delimiter(',');
  refuse_empty(reap->add_option("--uid", options.uids, "The job's owner by numeric uid (as --user)"), empty)->delimiter(',');
  refuse_empty(reap->add_option("--gpus", options.gpus,
                                "Only processes using these GPUs, and the GPUs to verify: NVIDIA indices, ranges and UUIDs, any GPU's PCI address (0,2-3,GPU-...,0000:c1:00.0)"),
               empty);
  reap->add_option("--except", options.except, "Never end processes whose executable's basename is NAME (not comm: a process names itself); what they hold still counts")
      ->expected(1, -1);
  refuse_empty(reap->add_option("--baseline-mib", options.baseline_mib,
                                "Memory a GPU may still show used when the job is gone, in MiB (default: see below)"),
               empty);
  reap->add_option("--kill-timeout", options.kill_timeout,
                   "Seconds from SIGTERM to SIGKILL, 0 to 3600 (default 10; also 500ms, 2m)");
  reap->add_option("--verify-timeout", options.verify_timeout,
                   "Seconds to wait for the GPUs to return to their baseline, 0 to 3600 (default 30)");
  reap->add_flag("--dry-run,-n", options.dry_run, "Show what would be ended and signal nothing");
  reap->add_flag("--json", options.json, "Machine-readable output (schema gpureap.reap/1, see docs/reap-json.md)");
  reap->add_option("--audit-log", options.audit_log, "Append one JSON line per signal to this file (mode 0600)");
  reap->add_flag("--wide,-w", options.wide, "Show whole command lines on a terminal too");
  add_color_option(reap, options.color);
  return reap;
}

int run_reap(ReapOptions options) {
  if (auto error = usage_check(options); !error.empty()) {
    std::cerr << error << "\n";
    return exit_code::kUsage;
  }
  const TerminalStyle style =
      TerminalStyle::for_fd(STDOUT_FILENO, options.json ? ColorChoice::Never : parse_color_choice(options.color));
  const auto setup = open_signal_setup("gpureap reap", options.audit_log, options.dry_run);
  if (!setup) return exit_code::kUsage;
  const SnapshotOptions snapshot_options = default_snapshot_options();
  const std::string proc_root = snapshot_options.proc.proc_root;

  ReapReport report;
  report.verify_timeout_s = options.verify_timeout_s;
  if (!options.users.empty() || !options.uids.empty()) report.criteria.uids = owner_uids(options);
  report.criteria.except = options.except;
  if (const int status = check_owner_uids(report.criteria); status != exit_code::kOk) return status;
  if (!options.cgroup.empty()) {
    if (const int status = read_cgroup(options.cgroup, proc_root, report.criteria); status != exit_code::kOk) {
      return status;
    }
  }

  SnapshotSource source(snapshot_options);
  auto snapshot = source.take();
  if (!options.gpus.empty()) {
    if (const int status = resolve_gpus(options.gpus, *snapshot, report.criteria); status != exit_code::kOk) {
      return status;
    }
  }

  PlanPolicy policy = kill_policy(*snapshot, setup->config.protect);
  const ReapSelection selected = select_reap(*snapshot, report.criteria, policy);
  report.spared = selected.spared;
  PreparedKill prepared = prepare_kill(*snapshot, selected.selection, std::move(policy), /*tree=*/false);
  const KillPlan& plan = prepared.plan;
  if (report.criteria.cgroup_dir) unpin_strangers(prepared.pins, proc_root, *report.criteria.cgroup_dir);

  CarryOutOptions how;
  how.execution.engine.timeout = std::chrono::milliseconds(static_cast<long long>(options.kill_timeout_s * 1000));
  how.execution.engine.proc_root = proc_root;
  how.execution.tree = false;
  how.release = ReleaseCheck::Caller;
  how.audit = setup->audit_log();
  report.kill = planned_report(plan, how.execution);
  report.kill.settings.timeout_s = options.kill_timeout_s;
  report.kill.settings.dry_run = options.dry_run;
  if (!options.json) write_plan(options, plan, report.kill.settings, style);
  if (options.dry_run) {
    const int status = reap_exit_status(report, exit_code::kOk);
    write_report(options, plan, report, status, style);
    return status;
  }

  InterruptGuard interrupts;  // the command's own thread: Ctrl-C stops the ladder, never gpureap mid-step
  how.execution.engine.interruption = interrupts.interruption();
  try {
    carry_out_kill(prepared, source, *snapshot, how, report.kill);
  } catch (const std::runtime_error& error) {
    std::cerr << "gpureap reap: " << sanitize_for_terminal(error.what()) << "; stopped before sending further signals\n";
    return exit_code::kInternalError;
  }
  report.survivors = find_survivors(report.kill, selected, report.criteria, proc_root);
  verify_gpus(options, selected, plan, source, *snapshot, report);
  const int status = reap_exit_status(report, driver_failure_status(*snapshot));
  write_report(options, plan, report, status, style);
  return status;
}

}  // namespace gpureap
