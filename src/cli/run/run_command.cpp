#include "cli/run/run_command.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/option_limits.hpp"
#include "cli/run/run_render.hpp"
#include "cli/common/selection_checks.hpp"
#include "cli/common/terminal_io.hpp"
#include "job/job_guard.hpp"
#include "audit/audit_log.hpp"
#include "kill/kill_config.hpp"
#include "proc/proc_io.hpp"
#include "snapshot/snapshot.hpp"
#include "text/duration.hpp"
#include "text/charset.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

// stdout is the job's too: the JSON starts on a line of its own unless what is there already
// ends a line (a regular file whose last byte is a newline, or an empty one). A pipe or a
// terminal cannot be read back, so there it always follows a line break.
bool stdout_needs_line_break() {
  struct stat st{};
  if (fstat(STDOUT_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) return true;
  const off_t offset = lseek(STDOUT_FILENO, 0, SEEK_CUR);
  if (offset <= 0) return offset != 0;
  const procfs::unique_fd again(open("/proc/self/fd/1", O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  char last = 0;
  return !again || pread(again.get(), &last, 1, offset - 1) != 1 || last != '\n';
}

// The status a person would otherwise have read in the report, for the line that says it
// could not be written.
std::string would_exit_words(int status) { return fmt::format("gpureap run would have exited with status {}", status); }

int cannot_run(const std::string& why) {
  std::cerr << "gpureap run: " << why << "\n";
  return exit_code::kRunCannotRun;
}

// The options' times and choices as the job's settings; the first bad one's error, or "".
std::string settings_from_options(const RunOptions& options, job::RunSettings& settings) {
  settings.argv = options.command;
  double kill_s = 0, verify_s = 0, poll_s = 0, hang_s = 0;
  for (const std::string& error :
       {check_duration_option("--kill-timeout", options.kill_timeout, option_limits::kMaxSignalTimeoutSeconds, kill_s),
        check_duration_option("--verify-timeout", options.verify_timeout, option_limits::kMaxVerifyTimeoutSeconds,
                              verify_s),
        check_duration_option("--poll-interval", options.poll_interval, option_limits::kMaxPollIntervalSeconds, poll_s,
                              option_limits::kMinPollIntervalSeconds)}) {
    if (!error.empty()) return error;
  }
  if (!options.hang_timeout.empty()) {
    const std::string error = check_duration_option("--hang-timeout", options.hang_timeout,
                                                    option_limits::kMaxHangTimeoutSeconds, hang_s,
                                                    option_limits::kMinHangTimeoutSeconds);
    if (!error.empty()) return error;
    settings.hang_timeout = to_ms(hang_s);
  }
  settings.kill_timeout = to_ms(kill_s);
  settings.verify_timeout = to_ms(verify_s);
  settings.poll_interval = to_ms(poll_s);
  settings.fail_fast = options.fail_fast;
  settings.dump_on_hang = options.dump_on_hang;
  settings.evidence_dir = options.evidence_dir;
  if (settings.evidence_dir.empty() && !options.report_file.empty()) settings.evidence_dir = options.report_file + ".evidence";
  settings.use_cgroup = !options.no_cgroup;
  settings.dev_dir = default_snapshot_options().proc.dev_dir;
  return "";
}

// The JSON report on stdout and in the --report file. A report that cannot be written is an
// error whatever the job did: a wrapper reading it would otherwise take a missing or cut
// report for the job's. False when one could not be written.
bool write_reports(const job::RunReport& report, const RunOptions& options, const procfs::unique_fd& report_fd,
                   int status) {
  if (!options.json && !report_fd) return true;
  bool written = true;
  const std::string json =
      run_report_json(report).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  signal(SIGPIPE, SIG_IGN);  // a closed pipe is a write error (EPIPE), not a silent death
  if (options.json) {
    std::fflush(stdout);
    const std::string text = stdout_needs_line_break() ? "\n" + json : json;
    if (const int error = procfs::write_all(STDOUT_FILENO, text); error != 0) {
      std::cerr << "gpureap run: --json: cannot write the report to stdout: " << std::strerror(error) << " ("
                << would_exit_words(status) << ")\n";
      written = false;
    }
  }
  if (report_fd) {
    if (const int error = procfs::write_all(report_fd.get(), json); error != 0) {
      std::cerr << "gpureap run: --report: cannot write " << sanitize_for_terminal(options.report_file) << ": "
                << std::strerror(error) << " (" << would_exit_words(status) << ")\n";
      written = false;
    }
  }
  return written;
}

}  // namespace

CLI::App* add_run_command(CLI::App& app, RunOptions& options) {
  CLI::App* run = app.add_subcommand(
      "run", "Run a job that owns its whole process tree; when it ends, end what it left and verify its GPU memory was freed");
  run->footer(
      "Usage: gpureap run [options] [--] COMMAND [ARGS...]\n\n"
      "gpureap's options end at the first word of the command, as for timeout(1) and env(1): everything\n"
      "after it (--report, -h, --json included) is the command's own.\n"
      "The job runs in its own process group and, where gpureap's cgroup v2 is its own to divide (delegated\n"
      "by systemd with Delegate=yes, as in the shipped gpureap-job@.service, or not systemd's at all: a\n"
      "container's), in its own cgroup gpureap-run.<pid>. It never creates one in a cgroup systemd did not\n"
      "delegate (an ssh session's scope): the job is then gpureap's descendants (it is their child\n"
      "subreaper), and the report says so (ownership, no_cgroup_reason). Nothing else is ever signalled.\n"
      "SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGCONT and SIGWINCH are forwarded to\n"
      "the job's processes in its process group (never to a stranger that joined the group). On a terminal\n"
      "Ctrl-Z stops gpureap with the job, as a shell's job (fg resumes both). As PID 1 of a container it\n"
      "reaps orphans.\n"
      "When the main command exits, whatever is left of the job gets SIGTERM, then SIGKILL after\n"
      "--kill-timeout (evidence is collected first: state, wchan, kernel stack; py-spy/gdb dumps with\n"
      "--dump-on-hang), and the GPU memory the job used is verified released.\n\n"
      "Exit status: the command's (128+signal when a signal ended it); with --fail-fast, that of the\n"
      "process that failed; 123 part of the job or its GPU memory is still there; 124 the job hung\n"
      "(--hang-timeout) and was ended; 125 gpureap run could not run (bad option, cgroup, fork), or the job\n"
      "ran but its --json or --report could not be written (stderr says the status it would have had);\n"
      "126 the command cannot be executed; 127 the command was not found.\n\n"
      "Environment: GPUREAP_AUDIT_LOG, GPUREAP_CONFIG, GPUREAP_NVML_LIBRARY, GPUREAP_DEV_DIR.");
  // Shown in the usage line only: the words from the command's first on never reach CLI11
  // (split_run_arguments), so this is never filled by it.
  run->add_option("command", options.command, "The command to run and its arguments: gpureap's options end at its first word");
  run->add_option("--kill-timeout", options.kill_timeout,
                  "Seconds between SIGTERM and SIGKILL for what is left of the job, 0 to 3600 (default 10)");
  run->add_option("--verify-timeout", options.verify_timeout,
                  "Seconds to wait for the driver to release the job's memory, 0 to 3600 (default 30)");
  run->add_flag("--fail-fast", options.fail_fast,
                "End the whole job as soon as a process of it that uses a GPU dies abnormally (a crashed rank)");
  refuse_empty(run->add_option("--hang-timeout", options.hang_timeout,
                               "End the job when none of its processes used CPU or GPU for this long (e.g. 30m; at most 7d)"),
               options.empty_option);
  run->add_flag("--dump-on-hang", options.dump_on_hang,
                "Before killing a hung or stubborn process, save `py-spy dump` (Python) or gdb backtraces of it");
  refuse_empty(run->add_option("--evidence-dir", options.evidence_dir,
                               "Where dumps are saved (default: a new private directory under $TMPDIR or /tmp)"),
               options.empty_option);
  run->add_option("--poll-interval", options.poll_interval,
                  "How often the job is looked at (GPU use, activity), 50ms to 60s (default 500ms)");
  run->add_flag("--json", options.json, "Print the final report as JSON on stdout (schema gpureap.run/1, docs/run-json.md)");
  refuse_empty(run->add_option("--report", options.report_file, "Also write the JSON report to this file (mode 0600)"),
               options.empty_option);
  run->add_flag("--no-cgroup", options.no_cgroup, "Do not create a cgroup: the job is gpureap's descendants only");
  run->add_option("--audit-log", options.audit_log, "Append one JSON line per signal gpureap sends to this file");
  return run;
}

RunArgumentSplit split_run_arguments(const CLI::App& run, const std::vector<std::string>& words) {
  std::size_t i = 0;
  while (i < words.size()) {
    const std::string& word = words[i];
    if (word == "--") return {i, i + 1};
    if (word.size() < 2 || word[0] != '-') break;  // the command's first word ("-" included)
    ++i;
    const auto equals = word.find('=');
    if (equals != std::string::npos) continue;  // --option=value
    // An unknown option stays on gpureap's side: CLI11 refuses it, rather than running it.
    const CLI::Option* option = run.get_option_no_throw(word);
    if (option != nullptr && option->get_items_expected_min() > 0 && i < words.size()) ++i;  // its value
  }
  return {i, i};
}

int run_run(RunOptions options) {
  if (!options.empty_option.empty()) {
    return cannot_run(options.empty_option + " was given an empty value (an unset variable?)");
  }
  if (options.command.empty()) return cannot_run("give the command to run: gpureap run [options] [--] COMMAND [ARGS...]");
  job::RunSettings settings;
  if (const std::string error = settings_from_options(options, settings); !error.empty()) return cannot_run(error);

  std::string config_error;
  const auto config = load_kill_config(config_error);
  if (!config) return cannot_run(sanitize_for_terminal(config_error));
  options.audit_log = audit_log_path(options.audit_log, *config);
  std::optional<AuditLog> audit;
  if (!options.audit_log.empty()) {
    std::string error;
    audit = AuditLog::open(options.audit_log, Requester::current(), error);
    if (!audit) return cannot_run(sanitize_for_terminal(error) + "; the job was not started");
    settings.audit = &*audit;
  }
  // The report file is opened before the job starts: a typo is found now, not after hours.
  procfs::unique_fd report_fd;
  if (!options.report_file.empty()) {
    std::string why;
    report_fd = procfs::open_output_file(options.report_file, procfs::OutputMode::Truncate, why);
    if (!report_fd) {
      return cannot_run(fmt::format("--report {}: {}; the job was not started",
                                    sanitize_for_terminal(options.report_file), sanitize_for_terminal(why)));
    }
  }

  job::RunReport report;
  try {
    report = job::run_job(settings);
  } catch (const job::RunSetupError& error) {
    return cannot_run(sanitize_for_terminal(error.what()) + "; the job was not started");
  } catch (const std::runtime_error& error) {
    std::cerr << "gpureap run: " << sanitize_for_terminal(error.what()) << "; stopped before sending further signals\n";
    return exit_code::kRunCannotRun;
  }
  const std::string summary = render_run_summary(report);
  if (!summary.empty()) std::cerr << in_charset(summary, terminal_charset());
  const int status = run_exit_status(report);
  return write_reports(report, options, report_fd, status) ? status : exit_code::kRunReportNotWritten;
}

}  // namespace gpureap
