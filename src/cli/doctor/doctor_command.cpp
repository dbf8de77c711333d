#include "cli/doctor/doctor_command.hpp"
#include "cli/common/option_limits.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/terminal_io.hpp"
#include "doctor/doctor.hpp"
#include "doctor/doctor_fix.hpp"
#include "cli/doctor/doctor_render.hpp"
#include "doctor/event_age.hpp"
#include "doctor/kernel_log.hpp"
#include "doctor/reset_readiness.hpp"
#include "kill/kill_config.hpp"
#include "text/duration.hpp"
#include "text/charset.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

int fail(const std::string& message) {
  std::cerr << "gpureap doctor: " << message << "\n";
  return exit_code::kDoctorCouldNotRun;
}

// Each time option through the one duration parser; the first error, or "".
std::string check_numbers(DoctorCommandOptions& o) {
  std::vector<std::string> errors;
  if (!o.since.empty()) errors.push_back(check_duration_option("--since", o.since, option_limits::kMaxSinceSeconds, o.since_s));
  errors.push_back(check_duration_option("--settle", o.settle, option_limits::kMaxSettleSeconds, o.settle_s));
  if (!o.tolerance_mib.empty()) {
    errors.push_back(check_number_option("--tolerance-mib", o.tolerance_mib, option_limits::kMaxToleranceMib, "MiB",
                                         o.tolerance_mib_value));
  }
  errors.push_back(check_duration_option("--timeout", o.timeout, option_limits::kMaxSignalTimeoutSeconds, o.timeout_s));
  errors.push_back(check_duration_option("--verify-timeout", o.verify_timeout, option_limits::kMaxVerifyTimeoutSeconds, o.verify_timeout_s));
  if (!o.ipc_min_age.empty()) {
    errors.push_back(check_duration_option("--ipc-min-age", o.ipc_min_age, option_limits::kMaxIpcMinAgeSeconds, o.ipc_min_age_s));
  }
  for (const auto& e : errors) {
    if (!e.empty()) return e;
  }
  return {};
}

std::string check_usage(DoctorCommandOptions& o) {
  if (!o.only.empty() && !o.fix) return "--only chooses what --fix does: add --fix";
  if (o.allow_reset && !o.fix) return "--allow-reset only matters with --fix: add --fix";
  if (!o.kernel_log.empty() && o.no_kernel_log) return "--kernel-log and --no-kernel-log contradict each other";
  if (std::string error = check_numbers(o); !error.empty()) return error;
  if (!o.since.empty() && o.no_kernel_log) return "--since filters Xid events: it makes no sense with --no-kernel-log";
  for (const auto& id : o.only) {
    const auto& known = fixable_finding_ids();
    const auto parsed = parse_finding_id(id);
    if (!parsed || std::find(known.begin(), known.end(), *parsed) == known.end()) {
      std::string list;
      for (const FindingId k : known) list += (list.empty() ? "" : ", ") + std::string(finding_id_name(k));
      return fmt::format("--only {}: not a finding --fix can act on (choose from: {})", sanitize_for_terminal(id), list);
    }
  }
  if (!o.kernel_log.empty()) {
    if (const std::string problem = kernel_log_file_problem(o.kernel_log); !problem.empty()) {
      return "--kernel-log " + sanitize_for_terminal(problem);
    }
  }
  return {};
}

// Resets the leaked GPUs the user allowed, each only once a fresh look finds nothing using it.
// gpureap's own NVML handle holds the device files, so the source is closed first.
void reset_leaked(std::unique_ptr<SnapshotSource>& source, const std::vector<const FixAction*>& actions,
                  std::vector<FixResult>& results) {
  std::vector<std::pair<unsigned, std::string>> ready;  // index, and the UUID (or bus id) nvidia-smi is given
  for (const FixAction* a : actions) {
    if (a->kind != FixAction::Kind::ResetGpu || !a->gpu) continue;
    auto fresh = source->take();
    const ResetReadiness readiness = check_reset_readiness(*fresh, *a->gpu);
    if (!readiness.ready()) {
      std::string why;
      for (const auto& b : readiness.blockers) why += (why.empty() ? "" : "; ") + b.text;
      results.push_back({a->finding_id, a->description, FixOutcome::Skipped, "not reset: " + why});
      continue;
    }
    const GpuView* gpu = fresh->gpu_by_index(*a->gpu);
    ready.emplace_back(*a->gpu, gpu == nullptr                   ? std::string()
                                : !gpu->reading.uuid.empty() ? gpu->reading.uuid
                                                             : gpu->reading.pci_bus_id);
  }
  if (ready.empty()) return;
  source.reset();
  for (const auto& [index, device_id] : ready) results.push_back(reset_gpu(index, device_id));
  source = std::make_unique<SnapshotSource>(default_snapshot_options());
}

DoctorOptions doctor_options(const DoctorCommandOptions& o) {
  DoctorOptions options;
  options.settle_seconds = o.settle_s;
  if (o.tolerance_mib_value >= 0) {
    options.tolerance_bytes = static_cast<std::uint64_t>(o.tolerance_mib_value * 1024 * 1024);
  }
  options.kernel_log = o.kernel_log;
  options.no_kernel_log = o.no_kernel_log;
  if (o.since_s >= 0) options.xid_max_age_seconds = o.since_s;
  if (o.ipc_min_age_s >= 0) options.ipc_min_age_seconds = o.ipc_min_age_s;
  return options;
}

// Asks before the fixes unless --yes; the exit status when they are not to be applied.
std::optional<int> refused_fixes(const DoctorCommandOptions& o, const std::string& plan) {
  if (o.yes) {
    if (!o.json) write_text("\n" + plan);
    return std::nullopt;
  }
  // The same rule as kill: asked on the terminal even when output is piped.
  const Answer answer = ask_on_terminal(plan, "Apply these fixes?");
  if (answer == Answer::NoTerminal) {
    std::cerr << in_charset(plan, terminal_charset()) << "gpureap doctor: there is no terminal to ask for confirmation on, so nothing was "
                         "changed: add --yes to apply these fixes without asking (exit status 10)\n";
    return exit_code::kAborted;
  }
  if (answer != Answer::Yes) {
    std::cerr << "gpureap doctor: not confirmed; nothing was changed (exit status 10)\n";
    return exit_code::kAborted;
  }
  return std::nullopt;
}

// The first look, and after --fix a second one: what the report and exit status describe.
struct DoctorLooks {
  std::unique_ptr<SnapshotSource> source;
  std::unique_ptr<Snapshot> snapshot;
  Diagnosis diagnosis;
  std::unique_ptr<Snapshot> final_snapshot;
  Diagnosis final_diagnosis;
};

// --fix: the chosen fixes shown beside the diagnosis, confirmed, applied and audited, then a
// fresh diagnosis of what remains. The exit status when doctor stops before the report.
std::optional<int> fix_and_look_again(const DoctorCommandOptions& o, const DoctorOptions& options,
                                      const TerminalStyle& style, const OutputWidth& width, DoctorLooks& looks,
                                      DoctorReport& report) {
  std::string config_error;
  const auto config = load_kill_config(config_error);
  if (!config) return fail(sanitize_for_terminal(config_error));
  FixOptions fix;
  for (const auto& id : o.only) fix.only.push_back(*parse_finding_id(id));  // checked by check_usage
  fix.allow_reset = o.allow_reset;
  fix.timeout_s = o.timeout_s;
  fix.verify_timeout_s = o.verify_timeout_s;
  fix.protect = config->protect;
  const auto actions = choose_fixes(looks.diagnosis, fix);
  if (actions.empty()) {
    if (!o.json) {
      report.fixes.push_back({std::nullopt, "nothing to fix", FixOutcome::Skipped,
                              o.only.empty() ? "no finding has a fix doctor applies without --only"
                                             : "the chosen findings have nothing to fix"});
    }
    return std::nullopt;
  }
  // Show the diagnosis first: the fixes only make sense beside it.
  // No exit status under it: that is known only after the fixes (or 10 when declined).
  DoctorReport before{looks.snapshot.get(), &looks.diagnosis, &options, false, {}, std::nullopt};
  if (!o.json) write_text(render_doctor(before, style, width));
  if (const auto refused = refused_fixes(o, render_fix_plan(actions, style, width))) return refused;
  const std::string audit_path = audit_log_path(o.audit_log, *config);
  std::optional<AuditLog> audit;
  if (!audit_path.empty()) {
    std::string error;
    audit = AuditLog::open(audit_path, Requester::current(), error);
    if (!audit) return fail(sanitize_for_terminal(error) + "; nothing was changed");
  }
  fix.audit = audit ? &*audit : nullptr;
  report.fixes = apply_fixes(*looks.source, *looks.snapshot, looks.diagnosis, actions, fix, options);
  reset_leaked(looks.source, actions, report.fixes);
  // What remains: a fresh diagnosis, which is what the exit status reports.
  looks.final_snapshot = looks.source->take();
  DoctorOptions again = options;
  again.settle_seconds = std::min(options.settle_seconds, 1.0);
  looks.final_diagnosis = diagnose(*looks.source, *looks.final_snapshot, again);
  return std::nullopt;
}

}  // namespace

CLI::App* add_doctor_command(CLI::App& app, DoctorCommandOptions& options) {
  CLI::App* doctor = app.add_subcommand("doctor", "Explain where GPU memory went and the safest way to get it back");
  doctor->footer(
      "Checks: memory no listed process explains (orphaned workers, a release in progress, a\n"
      "driver-level leak with the reset's preconditions), processes in other PID namespaces,\n"
      "zombies and D-state processes tied to GPUs, leftover System V and /dev/shm shared memory,\n"
      "Xid errors in the kernel log, and the driver's health. Remedies are listed safest first.\n\n"
      "--fix applies, after asking: ending orphaned holders of GPU memory, SIGCHLD to zombies'\n"
      "parents, and removing shared memory nobody uses. With --only ID, every fix of those\n"
      "findings (also ending unlisted holders or a zombie's parent). A GPU is reset only with\n"
      "--allow-reset, and only when nothing uses it. Without a terminal, --fix needs --yes.\n\n"
      "Exit status: 0 healthy (information at most), 1 warnings, 2 critical findings (after\n"
      "--fix: what remains), 10 fixes declined, 11 doctor could not run (bad option, unreadable\n"
      "--kernel-log, a bad --ipc-min-age).\n\n"
      "Shared memory: --fix removes a file in /dev/shm unasked only when it is a dead PyTorch\n"
      "job's (torch_<pid>_..., that PID gone), unwritten for --ipc-min-age, and nobody has it\n"
      "open or mapped; every other leftover, System V objects included, only with --only ID.\n"
      "Each removal is in the audit log like a signal.\n\n"
      "Environment: GPUREAP_NVML_LIBRARY, GPUREAP_DEV_DIR, GPUREAP_AUDIT_LOG, GPUREAP_CONFIG, NO_COLOR.");
  doctor->add_flag("--wide,-w", options.wide, "Lines as long as they are on a terminal too (they always are through a pipe)");
  doctor->add_flag("--json", options.json, "Machine-readable output (schema gpureap.doctor/1, see docs/doctor-json.md)");
  doctor->add_flag("--fix", options.fix, "Apply the safe remedies after showing them and asking");
  doctor->add_flag("--yes,-y", options.yes, "With --fix: do not ask");
  doctor->add_option("--only", options.only, "With --fix: act on these findings only (ids, comma-separated)")->delimiter(',');
  doctor->add_flag("--allow-reset", options.allow_reset,
                   "With --fix: reset a GPU whose memory leaked, once nothing uses it (nvidia-smi -r)");
  doctor->add_option("--kernel-log", options.kernel_log,
                     "Read Xid events from this file (dmesg or journalctl -k output) instead of /dev/kmsg");
  doctor->add_flag("--no-kernel-log", options.no_kernel_log, "Do not look for Xid events");
  doctor->add_option("--since", options.since,
                     "Ignore Xid events older than this (3600, 90s, 30m, 6h, 2d; at most 365d) when their age is known");
  doctor->add_option("--settle", options.settle,
                     "Seconds to re-measure memory nobody holds, to tell a release in progress from a leak, 0 to 600 "
                     "(default 3)");
  doctor->add_option("--tolerance-mib", options.tolerance_mib,
                     "Unexplained memory below this is normal driver overhead, 0 to 1048576 (default 64 MiB + 16 MiB "
                     "per process)");
  doctor->add_option("--timeout", options.timeout, "With --fix: seconds between SIGTERM and SIGKILL, 0 to 3600 (default 10)");
  doctor->add_option("--verify-timeout", options.verify_timeout,
                     "With --fix: seconds to wait for the driver to release the memory, 0 to 3600 (default 30)");
  doctor->add_option("--audit-log", options.audit_log,
                     "With --fix: append one JSON line per signal and per removal to this file (mode 0600)");
  doctor->add_option("--ipc-min-age", options.ipc_min_age,
                     "With --fix: a dead PyTorch job's /dev/shm file is removed unasked once unwritten this long "
                     "(600, 10m, 2h; at most 30d; default 10m)");
  add_color_option(doctor, options.color);
  return doctor;
}

int run_doctor(const DoctorCommandOptions& given) {
  DoctorCommandOptions o = given;
  if (const std::string error = check_usage(o); !error.empty()) return fail(error);
  const DoctorOptions options = doctor_options(o);
  const ColorChoice choice = parse_color_choice(o.color);
  const TerminalStyle style = TerminalStyle::for_fd(STDOUT_FILENO, o.json ? ColorChoice::Never : choice);
  const OutputWidth width = OutputWidth::for_fd(STDOUT_FILENO, o.wide);

  DoctorLooks looks;
  looks.source = std::make_unique<SnapshotSource>(default_snapshot_options());
  looks.snapshot = looks.source->take();
  looks.diagnosis = diagnose(*looks.source, *looks.snapshot, options);

  DoctorReport report;
  report.options = &options;
  report.fix_requested = o.fix;
  if (o.fix) {
    if (const auto stopped = fix_and_look_again(o, options, style, width, looks, report)) return *stopped;
  }
  const bool fixed = looks.final_snapshot != nullptr;
  report.snapshot = fixed ? looks.final_snapshot.get() : looks.snapshot.get();
  report.diagnosis = fixed ? &looks.final_diagnosis : &looks.diagnosis;
  report.exit_code = doctor_exit_status(report.diagnosis->findings);
  const int exit_status = *report.exit_code;
  if (o.json) {
    write_out(doctor_json(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  } else {
    if (fixed) write_text("\n" + style.bold("After the fixes:") + "\n");
    write_text(render_doctor(report, style, width));
  }
  return exit_status;
}

}  // namespace gpureap
