// `gpureap watch`: the loop. Every interval one look (observation.hpp), the rules over it
// (rule_book.hpp), and for each decision a log line, a count, a notification and, when a
// terminate rule's grace has passed, the action (termination.hpp) within the global cap, on a
// worker thread (termination_worker.hpp): the loop keeps looking and judging while a ladder
// waits. SIGHUP reloads the policy file (a bad one is logged and the old policy stays; an
// action under way finishes under the policy it started with); SIGTERM and SIGINT stop it
// cleanly, also in the middle of actions: every ladder under way is interrupted, continues
// everything it stopped and reports, the wait for the memory's release ends, no new action
// starts, and queued notifications get a few seconds to go out.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "snapshot/snapshot.hpp"
#include "watch/observation.hpp"
#include "watch/policy.hpp"
#include "watch/watch_counters.hpp"

namespace gpureap {

// The longest a stop takes, from SIGTERM to exit, whatever the policy's kill and verify
// timeouts (actions under way included): the ladders' and the verifications' waits wake at
// once, queued notifications get 1.5 s, `--listen`'s server 2 s; the rest is margin for the
// audit log's flushes. A notification command already running is given its own timeout on top
// (watch_stop_seconds). The shipped unit's TimeoutStopSec covers it (deploy/systemd; a test checks).
inline constexpr double kMaxStopSeconds = 15;

// What a stop may take under `policy`: kMaxStopSeconds, plus notify.command_timeout when it
// has a notification command (one may be running when the stop comes).
double watch_stop_seconds(const Policy& policy);

struct WatchDaemonOptions {
  std::string policy_path;                  // read again on SIGHUP
  std::optional<double> interval_override;  // --interval, over the file's
  bool force_dry_run = false;               // --dry-run, over the file's mode
  // --stop-timeout: how long the service manager waits for a stop before SIGKILL (the unit's
  // TimeoutStopSec); a policy whose stop may take longer is refused. Unset: not checked.
  std::optional<double> stop_timeout_seconds;
  // Where the audit log goes, as the command line and environment decided; "" to take the
  // policy's audit_log, then the configuration's.
  std::string audit_log_override;
  std::string config_audit_log;             // [kill] audit_log of the configuration file
  std::vector<std::string> protect;         // [kill] protect names
  int log_fd = 2;                           // one line per event (journald reads stderr)
  SnapshotOptions snapshot;
  // Called on the daemon's thread after the rules have judged each look (the first included):
  // `watch --listen` publishes its metrics from it. Must not block.
  std::function<void(const Look&)> on_look;
};

// The policy as the options change it (interval, dry run) and the audit log it will use; ""
// in `error` when it may run, else one line (enforce without an audit log, a webhook without
// the HTTP module, a stop that may outlast --stop-timeout). The start, a reload and
// --check-config all go through it.
struct EffectivePolicy {
  std::shared_ptr<const Policy> policy;
  std::string audit_log;
};
std::optional<EffectivePolicy> effective_policy(Policy policy, const WatchDaemonOptions& options, std::string& error);

// Runs until SIGTERM or SIGINT; returns the exit status: 0 after a clean stop; 2 when the
// policy cannot run on this host (a GPU it names does not exist, the audit log cannot be
// opened), and 1 when the signals cannot be set up, both with one line in `start_error`.
int run_watch_daemon(EffectivePolicy initial, const WatchDaemonOptions& options, CounterBoard& counters,
                     std::string& start_error);

}  // namespace gpureap
