// The two ways an event leaves gpureap: a command run with an argument vector (never a shell),
// the event's JSON on its standard input; and an HTTP POST of the JSON to a webhook. Each is
// bounded by its timeout, and says how it went.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "http/http_url.hpp"

namespace gpureap {

enum class DeliveryOutcome { Sent, Failed, TimedOut };
std::string_view delivery_outcome_name(DeliveryOutcome outcome);  // "sent", "failed", "timeout"

struct Delivery {
  DeliveryOutcome outcome = DeliveryOutcome::Failed;
  std::string detail;  // why, for the log: "exit status 3: <its stderr's first line>", "HTTP 500"
};

// Runs argv[0] (an absolute path) with argv through run_timed_command (spawn/timed_command.hpp),
// `json` on its stdin, stdout to /dev/null and the start of its stderr kept for the log. Sent
// when it exits 0 within the timeout; past it, its whole process group is sent SIGKILL: what
// it started in the background (`( sleep 300 ) &`) ends with it.
Delivery run_notify_command(const std::vector<std::string>& argv, const std::string& json,
                            std::chrono::milliseconds timeout);

// POST `json` (application/json) to an http:// or https:// URL through the HTTP module's
// client (gpureap-http.so, loaded only when a policy has a webhook); https verifies the
// server's certificate against the CAs of `ca_file` (PEM), or the system's when it is empty;
// the whole call (connecting, sending, the answer's head and body) ends at the timeout, and at
// once when `cancelled` (asked from another thread) says so. Sent on a 2xx status.
Delivery post_webhook(const std::string& url, const std::string& ca_file, const std::string& json,
                      std::chrono::milliseconds timeout, std::function<bool()> cancelled = {});

// The webhook URL split as the client needs it: its origin (parsed as fleet's URLs are) and
// the rest, path and query, sent as written ("/" when none). nullopt with one phrase in `error`
// for what the client cannot send: credentials (user:password@), a fragment, anything fleet's
// URLs refuse (another scheme, control characters, a port out of range).
struct WebhookTarget {
  HttpUrl origin;
  std::string path;
};
std::optional<WebhookTarget> parse_webhook_url(const std::string& url, std::string& error);

}  // namespace gpureap
