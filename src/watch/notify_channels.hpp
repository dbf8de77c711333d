// The two ways an event leaves gpureap: a command run with an argument vector (never a shell),
// the event's JSON on its standard input; and an HTTP POST of the JSON to a webhook. Each is
// bounded by its timeout, and says how it went.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gpureap {

enum class DeliveryOutcome { Sent, Failed, TimedOut };
std::string_view delivery_outcome_name(DeliveryOutcome outcome);  // "sent", "failed", "timeout"

struct Delivery {
  DeliveryOutcome outcome = DeliveryOutcome::Failed;
  std::string detail;  // why, for the log: "exit status 3: <its stderr's first line>", "HTTP 500"
};

// Runs argv[0] (an absolute path) with argv, `json` on its stdin, stdout to /dev/null and its
// stderr kept for the log, with default signal dispositions and mask whatever the daemon
// blocks. Sent when it exits 0 within the timeout; past it, the command (our own child, not
// yet reaped, so its PID cannot have been reused) is sent SIGKILL and reaped.
Delivery run_notify_command(const std::vector<std::string>& argv, const std::string& json,
                            std::chrono::milliseconds timeout);

// POST `json` (application/json) to an http:// or https:// URL through `helper`
// (gpureap-webhook: cpp-httplib, which gpureap itself does not load); https verifies the
// server's certificate against the system's CAs; each of connecting, sending and reading the
// answer is bounded by the timeout. Sent on a 2xx status.
Delivery post_webhook(const std::string& helper, const std::string& url, const std::string& json,
                      std::chrono::milliseconds timeout);

}  // namespace gpureap
