#include "cli/watch/watch_command.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/selection_checks.hpp"
#include "cli/common/serve_options.hpp"
#include "cli/common/terminal_io.hpp"
#include "cli/watch/watch_metrics.hpp"
#include "cli/watch/watch_render.hpp"
#include "doctor/kernel_log.hpp"
#include "exporter/exporter.hpp"
#include "kill/kill_config.hpp"
#include "text/duration.hpp"
#include "text/sanitize.hpp"
#include "watch/host_check.hpp"
#include "watch/policy.hpp"
#include "watch/watch_daemon.hpp"

namespace gpureap {
namespace {

constexpr const char* kWatchCommand = "gpureap watch";

// How long a stop waits for the exporter: its collections only copy what was published.
constexpr auto kServerStopGrace = std::chrono::seconds(2);
// The walk of /proc that checks the holders kept from the kernel's events, as often as the
// policy's default full scan.
constexpr double kWatchReconcileSeconds = 300;

void watch_says(const std::string& line) { say_on_stderr(kWatchCommand, line); }

// /metrics served beside the daemon (--listen): an Exporter over what each look publishes.
class MetricsServer {
 public:
  MetricsServer(const ServeOptions& serve, const CounterBoard& counters, WatchMetricsOptions metrics)
      : publisher_(collector_, counters, std::move(metrics)) {
    ExporterOptions options;
    options.listen = serve.listen;
    options.web = serve.web;
    options.max_scrapes = serve.max_scrapes;
    options.max_age = std::chrono::milliseconds(0);  // a collection is a copy of the published set
    options.log = watch_says;
    exporter_ = std::make_unique<Exporter>(collector_, options);
  }
  ~MetricsServer() {
    if (server_.joinable()) {
      exporter_->stop(kServerStopGrace);
      server_.join();
    }
  }

  bool start(std::string& error) {
    if (!exporter_->start(error)) return false;
    server_ = std::thread([this] {
      if (!exporter_->serve()) watch_says("stopped serving /metrics: accepting connections failed");
    });
    return true;
  }
  const ListenAddress& address() const { return exporter_->address(); }
  void on_look(const Look& look) { publisher_.on_look(look); }

 private:
  PublishedCollector collector_;
  WatchMetricsPublisher publisher_;
  std::unique_ptr<Exporter> exporter_;
  std::thread server_;
};

}  // namespace

CLI::App* add_watch_command(CLI::App& app, WatchOptions& options) {
  CLI::App* watch = app.add_subcommand(
      "watch", "The policy daemon: notify the owners of idle, old, oversized, orphaned or zombie GPU processes, and end them");
  watch->footer(
      "Every interval gpureap looks at the GPUs and their processes (the driver, and /proc for what can have\n"
      "changed; all of /proc again every full_scan_interval, and within a look or two of any end that can make\n"
      "an orphan or a zombie) and applies the policy's rules to the processes NVIDIA's driver lists and to\n"
      "ROCm jobs on AMD GPUs (/dev/kfd or a KFD context; their memory read at full scans, their utilisation\n"
      "unknown). A rule matches on user, group, command line (RE2), GPU (NVIDIA's index or UUID, an AMD or\n"
      "Intel GPU's PCI address), container or pod and GPU memory, has one condition (idle: the\n"
      "driver's per-process SM utilisation and CPU time both low for a duration; over-age; memory; orphan: a\n"
      "holder whose job is provably over, never PPID 1; zombie) and one action: log, notify (a command run\n"
      "without a shell, the event as JSON on its stdin; a webhook), or terminate: the owner is notified, and\n"
      "after the grace period, if it still matches on a fresh look, the kill engine ends it (pidfd-pinned,\n"
      "audited, memory verified), at most limits.max_terminations per limits.window. mode = \"dry-run\" (the\n"
      "default) only logs and notifies what it would do.\n\n"
      "Log: one line per event on stderr, \"<N>event=... key=value\" (journald reads the <N> priority).\n"
      "Signals: SIGHUP reloads the policy (a bad file is logged and the old policy kept); SIGTERM or SIGINT\n"
      "stop it (exit 0). An example policy, every key explained, and a systemd unit:\n"
      "/usr/share/doc/gpureap/examples/watch-policy.toml and .../examples/systemd/gpureap-watch.service.\n\n"
      "Exit status: 0 stopped by SIGTERM/SIGINT, or --check-config found the file valid; 2 usage error: a bad\n"
      "option, an invalid policy (file:line:column: why), enforce without an audit log, an audit log that\n"
      "cannot be opened, a GPU the policy names that this host lacks, a webhook without the HTTP module\n"
      "(gpureap-http.so, installed with gpureap); 12 --listen cannot serve (the address is in use,\n"
      "TLS files refused, no HTTP module); 1 internal error.\n\n"
      "--listen serves /metrics as `gpureap export` does (docs/metrics.md): the families and doctor's quick\n"
      "findings of the last full scan, the Xid counters (the kernel log read as it grows, every look) and the\n"
      "gpureap_watch_* counters, published after every look; a scrape never reads the driver.\n\n"
      "Environment: GPUREAP_AUDIT_LOG, GPUREAP_CONFIG ([kill] protect, audit_log), GPUREAP_NVML_LIBRARY,\n"
      "GPUREAP_DEV_DIR.");
  refuse_empty(watch->add_option("--policy", options.policy, "The policy file (TOML; default /etc/gpureap/watch.toml): owned by root or you, not "
                                 "writable by group or others, nor its directory"),
               options.empty_option);
  refuse_empty(watch->add_option("--check-config", options.check_config,
                                 "Check this policy file as the daemon does at start (audit log, HTTP module, the GPUs "
                                 "it names when a driver is loaded), print what its rules do, and exit (0 valid, 2 not)"),
               options.empty_option);
  refuse_empty(watch->add_option("--interval", options.interval,
                                 "Seconds between looks, over the policy's interval, 0.05 to 3600 (also 500ms, 1m)"),
               options.empty_option);
  watch->add_flag("--dry-run,-n", options.dry_run, "Log and notify only, whatever the policy's mode says");
  refuse_empty(watch->add_option("--audit-log", options.audit_log,
                                 "Append one JSON line per signal to this file (mode 0600), over the policy's audit_log"),
               options.empty_option);
  refuse_empty(watch->add_option("--listen", options.listen,
                                 "Serve /metrics (as export does) on IP:PORT or [IPv6]:PORT, e.g. 127.0.0.1:9874 (port 0: any free one)"),
               options.empty_option);
  refuse_empty(watch->add_option("--web-config", options.web_config,
                                 "With --listen: TLS and basic auth, in the YAML of Prometheus's exporter-toolkit"),
               options.empty_option);
  watch->add_flag("--per-process", options.per_process,
                  "With --listen: one series per GPU process, labelled with its pid, user, container and command");
  watch->add_option("--max-scrapes", options.max_scrapes,
                    "With --listen: scrapes served at once; more are answered 503, 1 to 1000 (default 10)");
  refuse_empty(watch->add_option("--kernel-log", options.kernel_log,
                                 "With --listen: count Xid events from this file as it grows instead of /dev/kmsg"),
               options.empty_option);
  watch->add_flag("--no-kernel-log", options.no_kernel_log, "With --listen: do not count Xid events");
  refuse_empty(watch->add_option("--stop-timeout", options.stop_timeout,
                                 "How long the service manager waits for a stop before SIGKILL (the unit's "
                                 "TimeoutStopSec): a policy whose stop may take longer is refused"),
               options.empty_option);
  return watch;
}

// --stop-timeout into `daemon`; "" when valid (or not given), else the error line.
static std::string take_stop_timeout(const WatchOptions& options, WatchDaemonOptions& daemon) {
  if (options.stop_timeout.empty()) return {};
  double seconds = 0;
  std::string error = check_duration_option("--stop-timeout", options.stop_timeout, 86400, seconds, 1);
  if (error.empty()) daemon.stop_timeout_seconds = seconds;
  return error;
}

// Every check the daemon makes before its first look, without starting it: the file, the
// audit log it would need, the HTTP module a webhook needs, the AMD and Intel GPUs the rules
// name by PCI address and (with a driver) NVIDIA's. Legal values that make a policy do nothing get a warning.
static int check_config(const WatchOptions& options) {
  std::string error;
  auto policy = load_policy(options.check_config, error);
  if (!policy) {
    std::cerr << kWatchCommand << ": " << sanitize_for_terminal(error) << "\n";
    return exit_code::kUsage;
  }
  const auto config = load_kill_config(error);
  if (!config) {
    std::cerr << kWatchCommand << ": " << sanitize_for_terminal(error) << "\n";
    return exit_code::kUsage;
  }
  WatchDaemonOptions daemon;
  daemon.audit_log_override = options.audit_log;
  if (const char* env = std::getenv("GPUREAP_AUDIT_LOG"); daemon.audit_log_override.empty() && env != nullptr) {
    daemon.audit_log_override = env;
  }
  daemon.config_audit_log = config->audit_log;
  if (error = take_stop_timeout(options, daemon); !error.empty()) {
    std::cerr << kWatchCommand << ": " << error << "\n";
    return exit_code::kUsage;
  }
  const auto effective = effective_policy(*policy, daemon, error);
  if (!effective) {
    std::cerr << kWatchCommand << ": " << sanitize_for_terminal(error) << "\n";
    return exit_code::kUsage;
  }
  const PolicyHostCheck host = check_policy_on_this_host(*policy);
  if (!host.problem.empty()) {
    std::cerr << kWatchCommand << ": " << sanitize_for_terminal(host.problem) << "\n";
    return exit_code::kUsage;
  }
  write_text(render_policy_summary(*policy));
  const bool terminates = std::any_of(policy->rules.begin(), policy->rules.end(),
                                      [](const Rule& r) { return r.action == RuleAction::Terminate; });
  if (policy->mode == WatchMode::Enforce && terminates && policy->max_terminations == 0) {
    std::cerr << kWatchCommand
              << ": warning: limits.max_terminations = 0 in enforce mode: the terminate rules will end nothing "
                 "(each match is deferred by the cap)\n";
  }
  if (!host.driver_read) std::cerr << kWatchCommand << ": note: " << sanitize_for_terminal(host.note) << "\n";
  return exit_code::kOk;
}

namespace {

// What is wrong with how the options go together, or "" (each is a usage error).
std::string options_problem(const WatchOptions& options) {
  const bool serve_asked = options.web_config || options.per_process || options.max_scrapes != "10" ||
                           !options.kernel_log.empty() || options.no_kernel_log;
  if (serve_asked && !options.listen) {
    return "--web-config, --per-process, --max-scrapes, --kernel-log and --no-kernel-log apply to --listen, which "
           "was not given";
  }
  if (!options.kernel_log.empty() && options.no_kernel_log) return "--kernel-log and --no-kernel-log contradict each other";
  if (!options.kernel_log.empty()) {
    if (const std::string problem = kernel_log_file_problem(options.kernel_log); !problem.empty()) {
      return "--kernel-log " + sanitize_for_terminal(problem);
    }
  }
  return {};
}

// The daemon's settings from the command line, then the environment, then the configuration;
// false (said on stderr) when one is a usage error.
bool take_daemon_settings(const WatchOptions& options, WatchDaemonOptions& daemon) {
  std::string error;
  daemon.policy_path = options.policy;
  daemon.force_dry_run = options.dry_run;
  if (!options.interval.empty()) {
    double seconds = 0;
    error = check_duration_option("--interval", options.interval, policy_limits::kMaxIntervalSeconds, seconds,
                                  policy_limits::kMinIntervalSeconds);
    if (!error.empty()) {
      std::cerr << kWatchCommand << ": " << error << "\n";
      return false;
    }
    daemon.interval_override = seconds;
  }
  if (error = take_stop_timeout(options, daemon); !error.empty()) {
    std::cerr << kWatchCommand << ": " << error << "\n";
    return false;
  }
  const auto config = load_kill_config(error);
  if (!config) {
    std::cerr << kWatchCommand << ": " << sanitize_for_terminal(error) << "\n";
    return false;
  }
  // The command line, then the environment, then the policy file, then the configuration.
  daemon.audit_log_override = options.audit_log;
  if (const char* env = std::getenv("GPUREAP_AUDIT_LOG"); daemon.audit_log_override.empty() && env != nullptr) {
    daemon.audit_log_override = env;
  }
  daemon.config_audit_log = config->audit_log;
  daemon.protect = config->protect;
  daemon.snapshot = default_snapshot_options();
  daemon.snapshot.holder_events = std::make_shared<HolderEvents>(kWatchReconcileSeconds);
  daemon.log_fd = STDERR_FILENO;
  return true;
}

// --listen: the metrics server started, and each look handed to it. Its exit status when it
// cannot serve.
int start_metrics_server(const WatchOptions& options, const ServeOptions& serve, CounterBoard& counters,
                         WatchDaemonOptions& daemon, std::unique_ptr<MetricsServer>& server) {
  // The signals the daemon reads from its signalfd are blocked before the server's threads
  // start, so that every thread inherits the mask and none of them is killed by SIGTERM.
  sigset_t daemon_signals;
  sigemptyset(&daemon_signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&daemon_signals, sig);
  pthread_sigmask(SIG_BLOCK, &daemon_signals, nullptr);
  WatchMetricsOptions metrics;
  metrics.snapshot.per_process = options.per_process;
  metrics.kernel_log = !options.no_kernel_log;
  metrics.xid.kernel_log_file = options.kernel_log;
  metrics.on_problem = watch_says;
  server = std::make_unique<MetricsServer>(serve, counters, std::move(metrics));
  std::string error;
  if (!server->start(error)) {
    watch_says(fmt::format("cannot serve on {}: {}", serve.listen.text(), error));
    return exit_code::kExportCannotServe;
  }
  watch_says(fmt::format("serving {}/metrics", server->address().url(serve.web.tls())));
  warn_about_exposure(serve, options.per_process, watch_says);
  MetricsServer* serving = server.get();
  daemon.on_look = [serving](const Look& look) { serving->on_look(look); };
  return exit_code::kOk;
}

}  // namespace

int run_watch(WatchOptions options) {
  if (!options.empty_option.empty()) {
    std::cerr << fmt::format("{}: {} was given an empty value (an unset variable?)\n", kWatchCommand, options.empty_option);
    return exit_code::kUsage;
  }
  if (!options.check_config.empty()) return check_config(options);
  if (const std::string problem = options_problem(options); !problem.empty()) {
    std::cerr << kWatchCommand << ": " << problem << "\n";
    return exit_code::kUsage;
  }
  std::string error;
  ServeOptions serve;
  if (options.listen) {
    if (error = check_serve_options({options.listen, options.web_config, options.max_scrapes}, serve); !error.empty()) {
      std::cerr << kWatchCommand << ": " << sanitize_for_terminal(error) << "\n";
      return exit_code::kUsage;
    }
  }
  WatchDaemonOptions daemon;
  if (!take_daemon_settings(options, daemon)) return exit_code::kUsage;
  auto policy = load_policy(options.policy, error);
  if (!policy) {
    std::cerr << kWatchCommand << ": " << sanitize_for_terminal(error) << "\n";
    return exit_code::kUsage;
  }
  auto effective = effective_policy(std::move(*policy), daemon, error);
  if (!effective) {
    std::cerr << kWatchCommand << ": " << sanitize_for_terminal(error) << "\n";
    return exit_code::kUsage;
  }
  CounterBoard counters;
  std::unique_ptr<MetricsServer> server;
  if (options.listen) {
    if (const int status = start_metrics_server(options, serve, counters, daemon, server); status != exit_code::kOk) {
      return status;
    }
  }
  const int status = run_watch_daemon(std::move(*effective), daemon, counters, error);
  if (!error.empty()) std::cerr << kWatchCommand << ": " << sanitize_for_terminal(error) << "\n";
  return status;
}

}  // namespace gpureap
