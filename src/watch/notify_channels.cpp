#include <algorithm>

#include <fmt/format.h>

#include "http/http_client.hpp"
#include "spawn/timed_command.hpp"
#include "watch/notify_channels.hpp"

namespace gpureap {
namespace {

constexpr std::size_t kMaxStderrBytes = 4096;
constexpr std::size_t kMaxWebhookAnswerBytes = 64 * 1024;

// The first line of what the command wrote to stderr, for the log (sanitised there).
std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
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
  TimedCommand command;
  command.argv = argv;
  command.timeout = timeout;
  command.give_input = true;
  command.input = json;
  command.capture_stderr_only = true;
  command.max_output_bytes = kMaxStderrBytes;
  const TimedRun run = run_timed_command(command);
  if (run.outcome == TimedOutcome::NotStarted) return {DeliveryOutcome::Failed, run.error};
  if (run.outcome == TimedOutcome::TimedOut) {
    return {DeliveryOutcome::TimedOut,
            fmt::format("{} did not finish within {} ms and was killed with its process group", argv[0], timeout.count())};
  }
  if (run.ok()) return {DeliveryOutcome::Sent, ""};
  const std::string said = first_line(run.output);
  return {DeliveryOutcome::Failed, describe_timed_run(run, timeout) + (said.empty() ? "" : ": " + said)};
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
