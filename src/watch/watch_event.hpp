// What `gpureap watch` tells an owner or an admin's channel: a first notice (the grace starts)
// or an action and its outcome, as a JSON object (schema "gpureap.watch.event/1", documented in
// docs/watch-policy.example.toml) and as a few key=value arguments for a notification command.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "watch/observation.hpp"
#include "watch/policy.hpp"

namespace gpureap {

enum class WatchEventKind {
  Notice,  // the rule matched for the first time; for terminate, the action follows after the grace
  Action,  // terminate: what was done (or, in dry-run, what would have been)
};
std::string_view watch_event_kind_name(WatchEventKind kind);  // "notice", "action"

struct WatchEvent {
  WatchEventKind kind = WatchEventKind::Notice;
  WatchMode mode = WatchMode::DryRun;
  std::string rule;
  Condition condition = Condition::Idle;
  RuleAction action = RuleAction::Log;
  double grace_seconds = 0;   // notice of a terminate rule: the time until the action
  Candidate process;
  std::string outcome;        // action: the kill engine's ("exited", "killed", ...), "would-terminate", "parent-nudged"
  std::uint64_t freed_bytes = 0;
  std::string message;        // one line for a person
  double unix_time = 0;
};

// The JSON body (a webhook's, a command's stdin). Command lines longer than 4 KiB are cut:
// the body then always fits a pipe's buffer and a small HTTP request.
std::string watch_event_json(const WatchEvent& event);

// Appended to the notification command's own arguments: event=, rule=, action=, mode=, pid=,
// uid=, user=, and outcome= for actions. Only values gpureap or the admin chose: the command
// line, attacker-controlled, is in the JSON on stdin alone.
std::vector<std::string> watch_event_arguments(const WatchEvent& event);

}  // namespace gpureap
