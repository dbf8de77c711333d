#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "http/http_client.hpp"
#include "proc/proc_io.hpp"
#include "proc/spawn_hygiene.hpp"
#include "watch/notify_channels.hpp"

extern char** environ;

namespace gpureap {
namespace {

constexpr std::size_t kMaxStderrBytes = 4096;
constexpr std::size_t kMaxWebhookAnswerBytes = 64 * 1024;

// The first line of what the command wrote to stderr, for the log (sanitised there).
std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return "ended";
}

}  // namespace

std::string_view delivery_outcome_name(DeliveryOutcome outcome) {
  switch (outcome) {
    case DeliveryOutcome::Sent: return "sent";
    case DeliveryOutcome::Failed: return "failed";
    case DeliveryOutcome::TimedOut: return "timeout";
  }
  return "failed";
}

namespace {

// A child run to its end or its timeout, with `input` on its stdin.
struct ChildRun {
  std::string spawn_error;  // set when it could not be started
  bool timed_out = false;   // killed at the timeout
  int status = 0;           // its wait status otherwise
  std::string said;         // the first line of its stderr
};

ChildRun failed_to_start(std::string why) {
  ChildRun run;
  run.spawn_error = std::move(why);
  return run;
}

ChildRun run_with_input(const std::vector<std::string>& argv, const std::string& input, std::chrono::milliseconds timeout) {
  ChildRun run;
  int in[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return failed_to_start(std::string("pipe: ") + std::strerror(errno));
  procfs::unique_fd in_read(in[0]), in_write(in[1]);
  if (pipe2(err, O_CLOEXEC) != 0) return failed_to_start(std::string("pipe: ") + std::strerror(errno));
  procfs::unique_fd err_read(err[0]), err_write(err[1]);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, in_read.get(), STDIN_FILENO);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&files, err_write.get(), STDERR_FILENO);
  // A refusal leaves only close-on-exec descriptors closed, as before; not worth failing the notice.
  (void)close_inherited_descriptors(files);
  // The daemon blocks its signals (a signalfd reads them) and ignores SIGPIPE: the child
  // starts with neither.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t child = -1;
  const int spawned = posix_spawn(&child, args[0], &files, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  in_read = procfs::unique_fd();
  err_write = procfs::unique_fd();
  if (spawned != 0) return failed_to_start(fmt::format("cannot run {}: {}", argv[0], std::strerror(spawned)));

  // The input fits the pipe's buffer (watch_event_json bounds it): written at once, then EOF.
  fcntl(in_write.get(), F_SETFL, O_NONBLOCK);
  (void)!::write(in_write.get(), input.data(), input.size());
  in_write = procfs::unique_fd();

  // Our own child: its pidfd says when it exits, whatever its descendants keep open.
  procfs::unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, child, 0)));
  fcntl(err_read.get(), F_SETFL, O_NONBLOCK);
  std::string stderr_text;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool exited = false;
  while (!exited) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd fds[2] = {{pidfd.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
    const int ready = ::poll(fds, err_read ? 2 : 1, pidfd ? static_cast<int>(std::min<long long>(left.count(), 1000)) : 10);
    if (ready < 0 && errno != EINTR) break;
    if (err_read && (fds[1].revents & (POLLIN | POLLHUP)) != 0) {
      char buffer[1024];
      const ssize_t n = ::read(err_read.get(), buffer, sizeof buffer);
      if (n > 0 && stderr_text.size() < kMaxStderrBytes) stderr_text.append(buffer, static_cast<std::size_t>(n));
      if (n == 0) err_read = procfs::unique_fd();
    }
    exited = ::waitpid(child, &run.status, WNOHANG) == child;
  }
  if (!exited) {
    ::kill(child, SIGKILL);  // our own child, not yet reaped: its PID cannot have been reused
    while (::waitpid(child, &run.status, 0) < 0 && errno == EINTR) {
    }
    run.timed_out = true;
  }
  if (err_read) {  // what it wrote just before exiting
    char buffer[1024];
    for (ssize_t n; stderr_text.size() < kMaxStderrBytes && (n = ::read(err_read.get(), buffer, sizeof buffer)) > 0;) {
      stderr_text.append(buffer, static_cast<std::size_t>(n));
    }
  }
  run.said = first_line(stderr_text);
  return run;
}

// The client's words, but naming the policy's key where fleet's would name its options.
std::string webhook_error_text(gpureap_http_error error) {
  switch (error) {
    case GPUREAP_HTTP_TLS_UNTRUSTED:
      return "the server's certificate was not trusted (name its CA in notify.webhook_ca_file)";
    case GPUREAP_HTTP_TLS_CA_FILE: return "the CA certificates of notify.webhook_ca_file could not be loaded";
    default: return http_error_text(error);
  }
}

}  // namespace

Delivery run_notify_command(const std::vector<std::string>& argv, const std::string& json,
                            std::chrono::milliseconds timeout) {
  const ChildRun run = run_with_input(argv, json, timeout);
  if (!run.spawn_error.empty()) return {DeliveryOutcome::Failed, run.spawn_error};
  if (run.timed_out) {
    return {DeliveryOutcome::TimedOut, fmt::format("{} did not finish within {} ms and was killed", argv[0], timeout.count())};
  }
  if (WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) return {DeliveryOutcome::Sent, ""};
  return {DeliveryOutcome::Failed, describe_status(run.status) + (run.said.empty() ? "" : ": " + run.said)};
}

std::optional<WebhookTarget> parse_webhook_url(const std::string& url, std::string& error) {
  const auto scheme_end = url.find("://");
  const auto path_start = url.find('/', scheme_end == std::string::npos ? 0 : scheme_end + 3);
  const std::string origin_text = url.substr(0, path_start);
  // The path and query too are sent as written: what a request line cannot carry is refused.
  if (std::any_of(url.begin(), url.end(), [](unsigned char c) { return c <= ' ' || c >= 0x7f; })) {
    error = "the URL holds spaces, control characters or non-ASCII bytes (percent-encode them)";
    return std::nullopt;
  }
  // Before the origin's own parse, whose message speaks of fleet's options.
  if (scheme_end != std::string::npos && origin_text.find('@', scheme_end) != std::string::npos) {
    error = "credentials in the URL (user:password@) are refused: the URL is shown by --check-config and a password "
            "there would travel to every log; a webhook that needs a secret takes it in its path, over https";
    return std::nullopt;
  }
  auto origin = parse_http_url(origin_text, error);
  if (!origin) return std::nullopt;
  std::string path = path_start == std::string::npos ? "/" : url.substr(path_start);
  if (path.find('#') != std::string::npos) {
    error = "the URL must not have a fragment (#...): it is never sent to a server";
    return std::nullopt;
  }
  return WebhookTarget{std::move(*origin), std::move(path)};
}

Delivery post_webhook(const std::string& url, const std::string& ca_file, const std::string& json,
                      std::chrono::milliseconds timeout, std::function<bool()> cancelled) {
  std::string error;
  const auto target = parse_webhook_url(url, error);
  if (!target) return {DeliveryOutcome::Failed, "the webhook URL: " + error};
  HttpClientConfig config;
  config.https = target->origin.scheme == UrlScheme::Https;
  config.host = target->origin.host;
  config.port = target->origin.port;
  config.verify_certificate = true;
  config.ca_file = ca_file;
  const auto client = HttpClient::open(config, error);
  if (!client) return {DeliveryOutcome::Failed, error};
  int status = 0;
  std::size_t answer_bytes = 0;
  HttpPost post;
  post.path = target->path;
  post.body = json;
  post.timeout_us = std::chrono::duration_cast<std::chrono::microseconds>(timeout).count();
  post.cancelled = std::move(cancelled);
  post.on_status = [&](int s, std::string_view) {
    status = s;
    return true;
  };
  post.on_body = [&](std::string_view piece) {  // read and dropped: only the status counts
    answer_bytes += piece.size();
    return answer_bytes <= kMaxWebhookAnswerBytes;
  };
  const gpureap_http_error result = client->post(post);
  if (result == GPUREAP_HTTP_DEADLINE || result == GPUREAP_HTTP_CONNECTION_TIMEOUT || result == GPUREAP_HTTP_READ ||
      result == GPUREAP_HTTP_WRITE) {
    return {DeliveryOutcome::TimedOut, "POST " + target->origin.text() + ": " + http_error_text(result)};
  }
  if (result != GPUREAP_HTTP_OK) {  // also an answer past kMaxWebhookAnswerBytes
    return {DeliveryOutcome::Failed, "POST " + target->origin.text() + ": " + webhook_error_text(result)};
  }
  if (status >= 200 && status < 300) return {DeliveryOutcome::Sent, ""};
  return {DeliveryOutcome::Failed, fmt::format("POST {}: HTTP {}", target->origin.text(), status)};
}

}  // namespace gpureap
