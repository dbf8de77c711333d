// The terminate action, only through the kill engine, on a snapshot taken for it: the process
// must still be the one the look saw (PID and start time), still a candidate of the same kind,
// and still match the rule; then plan (protection, identity, permission), pin by pidfd, the
// ladder with every signal audited, and the driver's verification that the memory came back.
// A zombie cannot be signalled away: its parent is reminded with SIGCHLD (pinned, audited),
// never ended.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "audit/audit_log.hpp"
#include "kill/escalation.hpp"
#include "accounts/user_names.hpp"
#include "snapshot/snapshot.hpp"
#include "watch/observation.hpp"
#include "watch/policy.hpp"

namespace gpureap {

struct TerminationSettings {
  double kill_timeout_seconds = 10;
  double verify_timeout_seconds = 30;
  std::vector<std::string> protect;  // [kill] protect names of the configuration, added to the built-in ones
  const AuditLog* audit = nullptr;
  // A stop asked of the daemon: the ladder continues what it stopped and returns, and the
  // wait for the memory's release ends.
  Interruption interruption;
};

struct TerminationResult {
  bool acted = false;          // a signal was sent (the ladder ran, or SIGCHLD went out)
  // The kill engine's outcome for the process ("exited", "killed", "survived", "refused", ...),
  // "parent-nudged" / "nudge-failed" for a zombie, or why nothing was done: "gone",
  // "no-longer-matches", "not-judgeable", "audit-failed".
  std::string outcome;
  bool verified = false;       // the driver showed the memory released
  std::uint64_t freed_bytes = 0;
  std::vector<pid_t> also_ended;  // its workers and other descendants the ladder ended with it
  std::string message;         // one line for the log and the owner
};

// The rule book's re-check of the process read again (RuleBook::still_holds, with the look's
// candidate and its age bound in): the caller decides how the book is shared with its loop.
using StillHolds = std::function<bool(const Candidate& fresh, const std::map<unsigned, std::string>& gpu_uuids)>;

TerminationResult terminate_candidate(SnapshotSource& source, const StillHolds& still_holds, const Rule& rule,
                                      const Candidate& seen, const TerminationSettings& settings, UserNames& names);

}  // namespace gpureap
