#include "cli/fleet/fleet_command.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common/exit_codes.hpp"
#include "cli/fleet/fleet_json.hpp"
#include "cli/fleet/fleet_render.hpp"
#include "cli/common/option_limits.hpp"
#include "cli/fleet/secret_file.hpp"
#include "cli/common/selection_checks.hpp"
#include "cli/common/terminal_io.hpp"
#include "fleet/fleet_reader.hpp"
#include "fleet/prometheus_client.hpp"
#include "kill/command_pattern.hpp"
#include "proc/proc_io.hpp"
#include "text/duration.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

constexpr const char* kPasswordVariable = "GPUREAP_PROMETHEUS_PASSWORD";

// The backstop for --timeout: the HTTP client bounds each wait and the body's arrival, but a
// server can still drip a response's headers a byte at a time. A second after the deadline
// this ends gpureap with the timeout's status and line: `fleet` must never hang a cron job or
// a monitoring check. Nothing has been written to stdout by then.
class DeadlineBackstop {
 public:
  DeadlineBackstop(std::chrono::steady_clock::time_point deadline, std::string line)
      : thread_([this, deadline, line = std::move(line)] {
          std::unique_lock lock(mutex_);
          if (cancelled_.wait_until(lock, deadline + std::chrono::seconds(1), [this] { return done_; })) return;
          (void)procfs::write_all(STDERR_FILENO, line);
          ::_exit(exit_code::kFleetUnreachable);
        }) {}
  ~DeadlineBackstop() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cancelled_.notify_one();
    thread_.join();
  }
  DeadlineBackstop(const DeadlineBackstop&) = delete;
  DeadlineBackstop& operator=(const DeadlineBackstop&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cancelled_;
  bool done_ = false;
  std::thread thread_;
};

// cpp-httplib 0.11 bounds each header line of an answer, not how many there are: a server that
// sends headers without end would make fleet grow until --timeout (gigabytes). A cap on the
// heap turns that into a failed allocation in the HTTP module, reported as a bad answer. 1 GiB is
// far above a legitimate read (a parsed answer takes about ten times its size, and answers
// are bounded by PrometheusOptions::max_response_bytes). Not under
// AddressSanitizer, whose allocator maps far more than it uses.
constexpr rlim_t kFleetHeapCapBytes = rlim_t{1} << 30;

void cap_heap() {
#if defined(__SANITIZE_ADDRESS__)
  return;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return;
#endif
#endif
  rlimit limit{};
  if (::getrlimit(RLIMIT_DATA, &limit) != 0) return;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur <= kFleetHeapCapBytes) return;
  limit.rlim_cur = kFleetHeapCapBytes;
  (void)::setrlimit(RLIMIT_DATA, &limit);
}

int failure_status(QueryFailureKind kind) {
  switch (kind) {
    case QueryFailureKind::Unreachable:
    case QueryFailureKind::Timeout: return exit_code::kFleetUnreachable;
    case QueryFailureKind::Refused:
    case QueryFailureKind::ApiError: return exit_code::kFleetQueryFailed;
    case QueryFailureKind::BadAnswer: return exit_code::kFleetBadAnswer;
    case QueryFailureKind::NoHttp: return exit_code::kInternalError;
  }
  return exit_code::kFleetBadAnswer;
}

std::string failure_line(const QueryFailure& failure, const std::string& url, double timeout_s) {
  std::string what;
  switch (failure.kind) {
    case QueryFailureKind::Unreachable: what = "cannot reach Prometheus at " + url; break;
    case QueryFailureKind::Timeout:
      what = fmt::format("Prometheus at {} did not answer within {}s (--timeout)", url, timeout_s);
      break;
    case QueryFailureKind::Refused:
    case QueryFailureKind::ApiError: what = "Prometheus at " + url + " did not run the query"; break;
    case QueryFailureKind::BadAnswer: what = "the answer from " + url + " could not be used"; break;
    case QueryFailureKind::NoHttp: what = "cannot query " + url; break;
  }
  std::string message = failure.message;
  if (message.size() > 400) message = message.substr(0, 400) + "...";
  return "gpureap fleet: " + sanitize_for_terminal(what) + ": " + sanitize_for_terminal(message) + "\n";
}

// Usage errors: one line, or "" when the options make sense. Fills in the client's options.
std::string check_options(FleetOptions& options, HttpUrl& url, PrometheusClientOptions& client,
                          std::optional<CommandPattern>& host_pattern) {
  if (!options.empty_option.empty()) {
    return fmt::format("gpureap fleet: {} was given an empty value (an unset variable?)", options.empty_option);
  }
  if (options.prometheus.empty()) return "gpureap fleet: give the server: --prometheus http://HOST:9090";
  std::string why;
  auto parsed = parse_http_url(options.prometheus, why);
  if (!parsed) {
    // A URL with credentials in it is not repeated: the error would copy the password into logs.
    if (options.prometheus.find('@') != std::string::npos) return "gpureap fleet: --prometheus: " + why;
    return fmt::format("gpureap fleet: --prometheus {}: {}", sanitize_for_terminal(options.prometheus.substr(0, 200)), why);
  }
  url = std::move(*parsed);
  if (auto error = check_duration_option("--timeout", options.timeout, option_limits::kMaxFleetTimeoutSeconds,
                                         options.timeout_s, option_limits::kMinFleetTimeoutSeconds);
      !error.empty()) {
    return "gpureap fleet: " + error;
  }
  client.timeout_s = options.timeout_s;
  if (url.scheme == UrlScheme::Http && (options.insecure || !options.ca_file.empty())) {
    return fmt::format("gpureap fleet: {} applies to https:// only", options.insecure ? "--insecure" : "--ca-file");
  }
  if (options.insecure && !options.ca_file.empty()) {
    return "gpureap fleet: --insecure and --ca-file contradict each other: a CA is only of use to verify";
  }
  if (!options.ca_file.empty() && ::access(options.ca_file.c_str(), R_OK) != 0) {
    return fmt::format("gpureap fleet: --ca-file {}: cannot be read", sanitize_for_terminal(options.ca_file));
  }
  client.ca_file = options.ca_file;
  client.insecure = options.insecure;

  const char* from_environment = std::getenv(kPasswordVariable);
  const bool environment_password = from_environment != nullptr && *from_environment != '\0';
  if (!options.password_file.empty() && options.user.empty()) {
    return "gpureap fleet: --password-file needs --user (basic authentication)";
  }
  if (!options.user.empty()) {
    std::string password;
    if (!options.password_file.empty()) {
      auto read = read_secret_file(options.password_file, why);
      if (!read) {
        return "gpureap fleet: " + sanitize_for_terminal(why);
      }
      password = std::move(*read);
    } else if (environment_password) {
      password = from_environment;
    } else {
      return fmt::format("gpureap fleet: --user needs a password: put it in a file (--password-file) or in {} "
                         "(never on the command line)",
                         kPasswordVariable);
    }
    if (options.user.find(':') != std::string::npos) {
      return "gpureap fleet: --user must not contain ':' (basic authentication separates the password with it)";
    }
    client.basic_auth = BasicAuth{options.user, std::move(password)};
  }
  if (!options.host_pattern.empty()) {
    host_pattern = CommandPattern::compile(options.host_pattern, why);
    if (!host_pattern) return "gpureap fleet: --host: " + why;
  }
  return {};
}

bool gpu_wanted(const FleetGpu& gpu, const std::vector<std::string>& wanted) {
  if (wanted.empty()) return true;
  return std::any_of(wanted.begin(), wanted.end(), [&](const std::string& item) {
    if (item == gpu.index) return true;
    return item.rfind("GPU-", 0) == 0 && !gpu.uuid.empty() && gpu.uuid.rfind(item, 0) == 0;
  });
}

// --host and --gpu, applied to what came back. A host that is down has no GPU rows left to
// match --gpu: it stays, since whatever it had is unknown.
void apply_filters(FleetView& view, const std::optional<CommandPattern>& host_pattern,
                   const std::vector<std::string>& gpus) {
  std::vector<FleetHost> kept;
  for (auto& host : view.hosts) {
    if (host_pattern && !host_pattern->search(host.instance)) continue;
    std::erase_if(host.gpus, [&](const FleetGpu& gpu) { return !gpu_wanted(gpu, gpus); });
    if (host.gpus.empty() && !gpus.empty() && host.scrape != ScrapeState::Down) continue;
    kept.push_back(std::move(host));
  }
  view.hosts = std::move(kept);
}

}  // namespace

CLI::App* add_fleet_command(CLI::App& app, FleetOptions& options) {
  CLI::App* fleet = app.add_subcommand(
      "fleet", "The cluster's GPUs as Prometheus sees them: memory, unattributed, orphans, top holders, last Xid");
  fleet->footer(
      "Reads the series of every `gpureap export` that the Prometheus server scrapes (deploy/prometheus),\n"
      "through its HTTP API (instant queries, evaluated at one instant; see docs/fleet.md). One row per\n"
      "host (the `instance` label) and GPU, the biggest holders under it: processes when the exporters\n"
      "run with --per-process, else users and containers. Hosts Prometheus can no longer scrape are\n"
      "listed as down. Everything from the server is shown sanitised; an answer is read up to 32 MiB.\n\n"
      "Basic authentication: --user, and the password in --password-file or GPUREAP_PROMETHEUS_PASSWORD\n"
      "(a password on the command line, or in the URL, is refused: any user can read it).\n\n"
      "Exit status: 0 listed, 2 usage error, 5 a host is down, has no driver or a lost GPU (the rest is\n"
      "listed), 20 Prometheus unreachable or no answer within --timeout, 21 it refused the credentials\n"
      "or failed the query, 22 its answer was not the API's JSON or too large, 23 no host exports\n"
      "gpureap series (or none that --host/--gpu keep).\n\n"
      "Environment: GPUREAP_PROMETHEUS_PASSWORD, NO_COLOR.");
  std::string& empty = options.empty_option;
  refuse_empty(fleet->add_option("--prometheus", options.prometheus,
                                 "The Prometheus server: http(s)://HOST:PORT[/PATH-PREFIX]"),
               empty);
  refuse_empty(fleet->add_option("--user", options.user, "Basic authentication user (password: --password-file or env)"),
               empty);
  refuse_empty(fleet->add_option("--password-file", options.password_file,
                                 "Read the basic authentication password from the first line of this file"),
               empty);
  refuse_empty(fleet->add_option("--ca-file", options.ca_file, "https: trust the CA certificates in this PEM file"), empty);
  fleet->add_flag("--insecure", options.insecure, "https: do not verify the server's certificate (a test server)");
  fleet->add_option("--timeout", options.timeout,
                    "Seconds for all queries together, 0.1 to 300 (default 10; also 500ms, 1m)");
  refuse_empty(fleet->add_option("--host", options.host_pattern,
                                 "Only hosts whose instance label matches this RE2 regex (searched, at most 1024 bytes)"),
               empty);
  refuse_empty(fleet->add_option("--gpu", options.gpus, "Only these GPUs of each host: indices or UUID prefixes (0,1,GPU-8f)"),
               empty)
      ->delimiter(',');
  fleet->add_option("--top", options.top, "Holders shown per GPU, 1 to 100 (default 3)")
      ->check(CLI::Range(1, kMaxTopHolders));
  fleet->add_flag("--json", options.json, "Machine-readable output (schema gpureap.fleet/1, see docs/fleet-json.md)");
  fleet->add_flag("--wide,-w", options.wide, "Show whole command lines on a terminal too");
  add_color_option(fleet, options.color);
  return fleet;
}

int run_fleet(FleetOptions options) {
  HttpUrl url;
  PrometheusClientOptions client_options;
  std::optional<CommandPattern> host_pattern;
  if (auto error = check_options(options, url, client_options, host_pattern); !error.empty()) {
    std::cerr << error << "\n";
    return exit_code::kUsage;
  }
  if (client_options.basic_auth && url.scheme == UrlScheme::Http && url.host != "127.0.0.1" && url.host != "::1" &&
      url.host != "localhost") {
    std::cerr << "gpureap fleet: warning: the password goes to " << sanitize_for_terminal(url.text())
              << " unencrypted (http://)\n";
  }
  const std::string source = url.text();
  cap_heap();
  PrometheusClient client(url, client_options);
  FleetReadResult read;
  {
    DeadlineBackstop backstop(client.deadline(),
                              failure_line(QueryFailure{QueryFailureKind::Timeout, "no complete answer"}, source,
                                           options.timeout_s));
    read = read_fleet([&client](const std::string& promql, std::optional<double> at) { return client.query(promql, at); },
                      options.top);
  }
  if (read.failure) {
    std::cerr << failure_line(*read.failure, source, options.timeout_s);
    return failure_status(read.failure->kind);
  }
  const bool had_hosts = !read.view.hosts.empty();
  apply_filters(read.view, host_pattern, options.gpus);
  if (read.view.hosts.empty()) {
    std::cerr << (had_hosts ? "gpureap fleet: no host matches --host/--gpu\n"
                            : "gpureap fleet: Prometheus at " + sanitize_for_terminal(source) +
                                  " has no gpureap series: is `gpureap export` running on the hosts, and in its "
                                  "scrape config (deploy/prometheus/prometheus.yml)?\n");
    return exit_code::kFleetNoHosts;
  }
  const int status = fleet_has_trouble(read.view) ? exit_code::kGpuError : exit_code::kOk;
  if (options.json) {
    write_out(fleet_json(read.view, source, status).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
              "\n");
  } else {
    write_text(render_fleet_table(read.view, source, TerminalStyle::for_fd(STDOUT_FILENO, parse_color_choice(options.color)),
                                 OutputWidth::for_fd(STDOUT_FILENO, options.wide)));
  }
  return status;
}

}  // namespace gpureap
