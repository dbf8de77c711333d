#include "cli/reap/reap_command.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/gpu_choice.hpp"
#include "cli/kill/kill_render.hpp"
#include "cli/common/option_limits.hpp"
#include "cli/reap/reap_render.hpp"
#include "cli/common/selection_checks.hpp"
#include "cli/common/terminal_io.hpp"
#include "audit/audit_log.hpp"
#include "kill/cgroup_kill.hpp"
#include "kill/interrupt_guard.hpp"
#include "kill/tree_sweep.hpp"
#include "kill/kill_config.hpp"
#include "kill/kill_execution.hpp"
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

int driver_failure_code(const Snapshot& snapshot) {
  return snapshot.driver.failure == LoadFailure::LibraryNotFound ? exit_code::kNoDriverLibrary
                                                                 : exit_code::kDriverInitFailed;
}

void write_json(const nlohmann::ordered_json& json) {
  write_out(json.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
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

  std::string config_error;
  const auto config = load_kill_config(config_error);
  if (!config) {
    std::cerr << "gpureap reap: " << sanitize_for_terminal(config_error) << "\n";
    return exit_code::kUsage;
  }
  const SnapshotOptions snapshot_options = default_snapshot_options();
  const std::string proc_root = snapshot_options.proc.proc_root;

  ReapReport report;
  report.verify_timeout_s = options.verify_timeout_s;
  if (!options.users.empty() || !options.uids.empty()) report.criteria.uids = owner_uids(options);
  report.criteria.except = options.except;
  // Another user's processes cannot all be seen (their descriptors, so their device files) nor
  // signalled without root: their GPUs would be called back to baseline on what was hidden.
  if (report.criteria.uids && ::geteuid() != 0) {
    for (uid_t uid : *report.criteria.uids) {
      if (uid == ::geteuid()) continue;
      std::cerr << fmt::format("gpureap reap: uid {}'s processes can be ended only by root (gpureap runs as uid {}); "
                               "nothing was signalled\n",
                               uid, ::geteuid());
      return exit_code::kPermissionDenied;
    }
  }
  if (!options.cgroup.empty()) {
    std::string error;
    const std::string dir = resolve_cgroup_dir(options.cgroup, proc_root, error);
    if (dir.empty()) {
      std::cerr << "gpureap reap: " << sanitize_for_terminal(error) << "; nothing was signalled\n";
      return exit_code::kUsage;
    }
    report.criteria.cgroup_dir = dir;
  }

  std::optional<AuditLog> audit;
  options.audit_log = audit_log_path(options.audit_log, *config);
  if (!options.audit_log.empty() && !options.dry_run) {
    std::string error;
    audit = AuditLog::open(options.audit_log, Requester::current(), error);
    if (!audit) {
      std::cerr << "gpureap reap: " << sanitize_for_terminal(error) << "; nothing was signalled\n";
      return exit_code::kUsage;
    }
  }

  // The cgroup's members are read before the snapshot, so that each of them is in it.
  if (report.criteria.cgroup_dir) {
    const auto members = cgroupfs::read_subtree_pids(*report.criteria.cgroup_dir);
    if (!members) {
      std::cerr << "gpureap reap: --cgroup " << sanitize_for_terminal(*report.criteria.cgroup_dir)
                << ": cannot read its cgroup.procs (run as root); nothing was signalled\n";
      return exit_code::kPermissionDenied;
    }
    report.criteria.cgroup_pids = *members;
    // kill(pid, 0) sends nothing: it asks the kernel whether we may signal that process.
    for (pid_t pid : *members) {
      if (::kill(pid, 0) != 0 && errno == EPERM) {
        std::cerr << "gpureap reap: --cgroup " << sanitize_for_terminal(*report.criteria.cgroup_dir)
                  << fmt::format(": PID {} in it belongs to another user and gpureap may not signal it (run as root); "
                                 "nothing was signalled\n",
                                 pid);
        return exit_code::kPermissionDenied;
      }
    }
  }
  SnapshotSource source(snapshot_options);
  auto snapshot = source.take();
  if (!options.gpus.empty()) {
    GpuChoiceError error;
    auto gpus = resolve_gpu_choice({options.gpus}, *snapshot, "--gpus", error);
    if (!gpus) {
      std::cerr << "gpureap reap: " << error.message << "; nothing was signalled\n";
      // An index while NVIDIA's library is missing is the driver's failure, where NVIDIA GPUs exist.
      return error.needs_nvidia_library && !snapshot->driver.no_nvidia_gpus() ? driver_failure_code(*snapshot)
                                                                              : exit_code::kUsage;
    }
    report.criteria.gpus = std::move(gpus->nvidia);
    report.criteria.drm_gpus = std::move(gpus->drm);
  }

  PlanPolicy policy = PlanPolicy::for_current_process(*snapshot);
  for (const auto& name : config->protect) policy.protect.add(name);
  const ReapSelection selected = select_reap(*snapshot, report.criteria, policy);
  report.spared = selected.spared;
  const KillPlan plan = plan_selected(*snapshot, selected.selection, policy, /*tree=*/false);

  report.kill.settings.signal = "SIGTERM";
  report.kill.settings.timeout_s = options.kill_timeout_s;
  report.kill.settings.dry_run = options.dry_run;
  report.kill.settings.tree = false;
  report.kill.targets = planned_outcomes(plan);

  std::map<pid_t, PinResult> pins = pin_targets(plan, *snapshot);
  // The cgroup's PIDs were read before the pins: each pinned one is shown in the cgroup again
  // through its pin, or it is a stranger that took a member's PID and is left alone.
  if (report.criteria.cgroup_dir) {
    for (auto& [pid, pin] : pins) {
      if (pin.status == PinStatus::Ok && !sweep::pinned_in_cgroup(proc_root, pin.ref, *report.criteria.cgroup_dir)) {
        pin = PinResult{PinStatus::IdentityChanged, 0, {}};
      }
    }
  }
  if (!options.json) {
    if (plan.targets.empty()) {
      write_text(style.bold(fmt::format("{}Nothing of the job is running", options.dry_run ? "[dry run] " : "")) + "\n");
    } else {
      write_text(render_plan(plan, report.kill.settings, style, OutputWidth::for_fd(STDOUT_FILENO, options.wide)));
    }
  }
  if (options.dry_run) {
    const int status = reap_exit_status(report, exit_code::kOk);
    if (options.json) {
      write_json(reap_report_json(plan, report, status));
    } else {
      write_text(render_reap_outcome(report, style));
    }
    return status;
  }

  ExecutionOptions execution;
  execution.engine.first_signal = SIGTERM;
  execution.engine.timeout = std::chrono::milliseconds(static_cast<long long>(options.kill_timeout_s * 1000));
  execution.engine.proc_root = proc_root;
  execution.tree = false;
  InterruptGuard interrupts;  // the command's own thread: Ctrl-C stops the ladder, never gpureap mid-step
  execution.engine.interruption = interrupts.interruption();
  try {
    execute_plan(plan, pins, *snapshot, policy, execution, audit ? &*audit : nullptr, report.kill);
  } catch (const std::runtime_error& error) {
    std::cerr << "gpureap reap: " << sanitize_for_terminal(error.what()) << "; stopped before sending further signals\n";
    return exit_code::kInternalError;
  }

  report.survivors = find_survivors(report.kill, selected, report.criteria, proc_root);
  std::set<unsigned> to_verify = report.criteria.gpus ? *report.criteria.gpus : selected.gpus_used;
  if (!to_verify.empty() && report.kill.interrupted_by == 0) {
    if (!snapshot->driver.loaded) {
      report.driver_unreadable = true;
      report.kill.notes.push_back("GPU memory not verified: " + snapshot->driver.message);
    } else {
      std::vector<ReapGpuCheck> checks;
      for (unsigned index : to_verify) {
        ReapGpuCheck check{.index = index};
        if (options.baseline_mib_value >= 0) {
          check.baseline_override = static_cast<std::uint64_t>(options.baseline_mib_value * 1024 * 1024);
        }
        checks.push_back(check);
      }
      ReapVerifyOptions verify;
      // With a survivor, waiting cannot help: one reading says where the GPUs stand.
      verify.timeout = std::chrono::milliseconds(
          report.survivors.empty() ? static_cast<long long>(options.verify_timeout_s * 1000) : 0);
      report.gpus = verify_baseline(checks, selected.listed_pids, [&source]() { return source.read_driver_only(); },
                                    verify);
    }
  }

  // AMD and Intel GPUs the job held clients of: their release as kill verifies it.
  if (!plan.drm_gpus.empty() && report.kill.interrupted_by == 0) {
    VerifyOptions verify;
    verify.timeout = std::chrono::milliseconds(
        report.survivors.empty() ? static_cast<long long>(options.verify_timeout_s * 1000) : 0);
    report.kill.drm_gpus = verify_drm_release(plan, [&source]() { return source.read_drm_only(); }, verify);
  }

  const int status = reap_exit_status(report, driver_failure_code(*snapshot));
  if (options.json) {
    write_json(reap_report_json(plan, report, status));
  } else {
    if (!plan.targets.empty()) write_text(render_results(plan, report.kill, style));
    write_text(render_reap_outcome(report, style));
  }
  return status;
}

}  // namespace gpureap
