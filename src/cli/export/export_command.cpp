#include "cli/export/export_command.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/option_limits.hpp"
#include "cli/common/serve_options.hpp"
#include "cli/common/terminal_io.hpp"
#include "doctor/kernel_log.hpp"
#include "exporter/exporter.hpp"
#include "metrics/collector.hpp"
#include "metrics/text_format.hpp"
#include "snapshot/holder_event_drain.hpp"
#include "text/duration.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

constexpr const char* kCommand = "gpureap export";
// How long a stop waits for a collection in progress; a hung driver call never returns.
constexpr auto kStopGrace = std::chrono::seconds(2);

void export_says(const std::string& line) { say_on_stderr(kCommand, line); }

struct CheckedOptions {
  ServeOptions serve;
  double cache_seconds = 1;
  double reconcile_seconds = 300;
};

// The first problem with the options, in one line, or "".
std::string check(const ExportOptions& o, CheckedOptions& out) {
  for (const auto& [name, value] : {std::pair{"--listen", &o.listen}, std::pair{"--web-config", &o.web_config},
                                    std::pair{"--kernel-log", &o.kernel_log}}) {
    if (value->has_value() && (*value)->empty()) return fmt::format("{} was given an empty value (an unset variable?)", name);
  }
  if (o.kernel_log && o.no_kernel_log) return "--kernel-log and --no-kernel-log contradict each other";
  if (o.once && (o.listen || o.web_config)) return "--once prints one collection to stdout: --listen and --web-config do not apply";
  std::string error;
  // The web-config is read last: a bad --cache or --kernel-log is told first.
  if (error = check_serve_options({o.listen, std::nullopt, o.max_scrapes}, out.serve); !error.empty()) return error;
  if (error = check_duration_option("--cache", o.cache, option_limits::kMaxExportCacheSeconds, out.cache_seconds);
      !error.empty()) {
    return error;
  }
  if (error = check_duration_option("--reconcile", o.reconcile, option_limits::kMaxReconcileSeconds,
                                    out.reconcile_seconds, 1);
      !error.empty()) {
    return error;
  }
  if (o.kernel_log) {
    if (const std::string problem = kernel_log_file_problem(*o.kernel_log); !problem.empty()) {
      return "--kernel-log " + problem;
    }
  }
  if (o.web_config) return check_serve_options({o.listen, o.web_config, o.max_scrapes}, out.serve);
  return {};
}

HostCollectorOptions collector_options(const ExportOptions& o, double reconcile_seconds) {
  HostCollectorOptions options;
  options.snapshot.holder_events = std::make_shared<HolderEvents>(reconcile_seconds);
  options.metrics.per_process = o.per_process;
  options.kernel_log = !o.no_kernel_log;
  options.xid.kernel_log_file = o.kernel_log.value_or("");
  options.on_problem = export_says;
  return options;
}

int print_once(const ExportOptions& o) {
  HostCollectorOptions options = collector_options(o, 300);
  options.snapshot.holder_events = nullptr;  // one collection: a walk, as ps
  options.xid.history_bytes = kUnlimitedKernelLogBytes;  // one collection: the whole log, counted
  HostCollector collector(std::move(options));
  const std::string text = render_text_format(collector.collect());
  write_out(text);
  return exit_code::kOk;
}

}  // namespace

CLI::App* add_export_command(CLI::App& app, ExportOptions& options) {
  CLI::App* command = app.add_subcommand("export", "Serve this host's GPU memory, its holders and Xid events to Prometheus");
  command->footer(
      "Metrics (docs/metrics.md): per GPU memory (used, reserved, free, unattributed), utilisation,\n"
      "temperature, power, holders by role, orphaned holders and the memory they keep, lost GPUs;\n"
      "memory per user and per container; doctor's quick findings; Xid events from the kernel\n"
      "log; with --per-process one series per GPU process (pid, user, container, command).\n\n"
      "Scrapes share one collection: one younger than --cache is served as it is, and concurrent\n"
      "scrapes wait for the same one, never past the timeout Prometheus sends\n"
      "(X-Prometheus-Scrape-Timeout-Seconds): a collection that does not finish in time (a hung\n"
      "driver) is answered with the previous one and gpureap_collection_stale 1.\n\n"
      "Listens on 127.0.0.1:9874 (this host only) unless --listen says otherwise. --web-config\n"
      "takes Prometheus's exporter-toolkit file: tls_server_config (cert_file, key_file) and\n"
      "basic_auth_users (bcrypt hashes). /healthz answers \"ok\" without credentials.\n"
      "SIGTERM or SIGINT stops it (exit 0).\n\n"
      "Exit status: 0 stopped by a signal (or --once printed), 2 bad option or web-config,\n"
      "12 cannot serve (the address is in use or cannot be bound, TLS files refused).\n\n"
      "Environment: GPUREAP_NVML_LIBRARY, GPUREAP_DEV_DIR.");
  command->add_option("--listen", options.listen,
                      "Address to listen on: IP:PORT or [IPv6]:PORT (default 127.0.0.1:9874; port 0: any free one)");
  command->add_option("--web-config", options.web_config,
                      "TLS and basic auth, in the YAML of Prometheus's exporter-toolkit (see docs/metrics.md); "
                      "owned by root or you, not writable by group or others");
  command->add_flag("--per-process", options.per_process,
                    "Add one series per GPU process, labelled with its pid, user, container and command");
  command->add_option("--max-scrapes", options.max_scrapes,
                      "Scrapes served at once; more are answered 503, 1 to 1000 (default 10)");
  command->add_option("--cache", options.cache,
                      "Serve a collection younger than this as it is, 0 to 60 s (default 1s; 0: always a new one)");
  command->add_option("--reconcile", options.reconcile,
                      "How often a walk of /proc checks the holders kept from the kernel's events, 1s to 24h "
                      "(default 5m; without events every collection walks)");
  command->add_option("--kernel-log", options.kernel_log,
                      "Count Xid events from this file as it grows (a journalctl -kf or syslog file) instead of /dev/kmsg");
  command->add_flag("--no-kernel-log", options.no_kernel_log, "Do not count Xid events");
  command->add_flag("--once", options.once, "Print one collection to stdout in the Prometheus text format and exit");
  return command;
}

int run_export(const ExportOptions& options) {
  CheckedOptions checked;
  if (const std::string error = check(options, checked); !error.empty()) {
    export_says(error);
    return exit_code::kUsage;
  }
  if (options.once) return print_once(options);

  // SIGTERM and SIGINT are taken by this thread alone (sigwait below): blocked before any
  // other thread starts, so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  HostCollectorOptions collecting = collector_options(options, checked.reconcile_seconds);
  // The kernel's events read as they come, not only at scrapes: between two scrapes a busy
  // host's forks and exits would overflow the connector's buffer into a walk.
  const HolderEventDrain drain(collecting.snapshot.holder_events);
  auto collector = std::make_unique<HostCollector>(std::move(collecting));
  ExporterOptions exporter_options;
  exporter_options.listen = checked.serve.listen;
  exporter_options.web = checked.serve.web;
  exporter_options.max_scrapes = checked.serve.max_scrapes;
  exporter_options.max_age = std::chrono::milliseconds(static_cast<long long>(checked.cache_seconds * 1000));
  exporter_options.log = export_says;
  auto exporter = std::make_unique<Exporter>(*collector, exporter_options);
  std::string error;
  if (!exporter->start(error)) {
    export_says(fmt::format("cannot serve on {}: {}", checked.serve.listen.text(), error));
    return exit_code::kExportCannotServe;
  }
  export_says(fmt::format("serving {}/metrics", exporter->address().url(checked.serve.web.tls())));
  warn_about_exposure(checked.serve, options.per_process, export_says);

  bool accept_failed = false;
  std::thread server([&] {
    if (!exporter->serve()) {
      accept_failed = true;
      ::kill(::getpid(), SIGTERM);  // wakes the sigwait below
    }
  });
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  const bool collection_ended = exporter->stop(kStopGrace);
  server.join();
  if (accept_failed) export_says("stopped: accepting connections failed");
  const int status = accept_failed ? exit_code::kExportCannotServe : exit_code::kOk;
  if (!collection_ended) {
    // Its thread still uses the collector and the exporter: neither may be destroyed.
    export_says("a collection is still waiting on the driver: exiting without it");
    std::fflush(stdout);
    std::fflush(stderr);
    ::_exit(status);
  }
  return status;
}

}  // namespace gpureap
