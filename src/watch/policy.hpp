// The policy `gpureap watch` enforces, as read from its TOML file (docs/watch-policy.example.toml
// explains every key). Parsing is strict: an unknown key, a value of the wrong type, a duration
// or size that is not one, an unknown user or group, an invalid regular expression or mode is
// one error line naming "<file>:<line>:<column>", and no policy.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "kill/command_pattern.hpp"

namespace gpureap {

// dry-run (the default) logs and notifies what it would do; enforce ends processes.
enum class WatchMode { DryRun, Enforce };
std::string_view watch_mode_name(WatchMode mode);  // "dry-run", "enforce"

// What makes a matched process a target; each rule has exactly one.
enum class Condition {
  Idle,     // SM utilisation (the driver's per-process samples) and CPU time both low, for a duration
  OverAge,  // running for longer than a limit
  Memory,   // more GPU memory than a limit (summed over its GPUs)
  Orphan,   // a holder whose job is provably over (snapshot's OrphanEvidence; never PPID 1)
  Zombie,   // an unreaped zombie of a GPU process
};
std::string_view condition_name(Condition condition);  // "idle", "over-age", "memory", "orphan", "zombie"

enum class RuleAction { Log, Notify, Terminate };
std::string_view rule_action_name(RuleAction action);  // "log", "notify", "terminate"

// A user or group as the file names it, resolved when the file was read.
struct NamedId {
  std::string name;  // as written ("alice", or "1000")
  unsigned id = 0;   // uid or gid
};

// An NVIDIA GPU by index, or by UUID (a prefix naming one GPU, as --gpus takes it); an AMD or
// Intel GPU by PCI address.
struct GpuRef {
  std::optional<unsigned> index;
  std::string uuid;   // lower case, "gpu-..." or "mig-..."
  std::string where;  // "<file>:<line>:<column>", for the error when this host has no such GPU
  std::string pci;    // "0000:03:00.0", lower case; index and uuid are empty then
};

// Which processes a rule is about; every field given must hold (AND), each list is an OR.
struct ProcessMatch {
  std::vector<NamedId> users;               // the process's real uid
  std::vector<NamedId> groups;              // its owner is a member (primary or supplementary)
  std::optional<CommandPattern> command;    // RE2, searched in the command line
  std::string command_text;                 // the pattern as written
  std::vector<GpuRef> gpus;                 // uses one of these GPUs
  std::vector<std::string> containers;      // container id or pod UID prefixes
  std::optional<std::uint64_t> min_memory;  // at least this much GPU memory (summed)
};

// Processes never touched. Command lines are not among them: a process chooses its own, and
// could name itself like an exclusion to escape the policy; its executable's path is the
// kernel's (a user cannot plant a binary in /usr/bin).
struct ProcessExclusion {
  std::vector<NamedId> users;
  std::vector<NamedId> groups;
  std::vector<std::string> executables;  // absolute paths; a trailing '*' matches a prefix
  std::vector<std::string> containers;   // container id or pod UID prefixes
  bool empty() const { return users.empty() && groups.empty() && executables.empty() && containers.empty(); }
};

struct Rule {
  std::string name;
  Condition condition = Condition::Idle;
  RuleAction action = RuleAction::Log;
  // terminate: the time between the first notice (the owner is notified) and the action; the
  // process must still match when it has passed.
  double grace_seconds = 0;
  // idle
  double idle_seconds = 0;
  unsigned max_sm_util_percent = 5;  // at most this SM utilisation counts as idle
  double max_cpu_percent = 1;        // at most this share of one core between two CPU readings
  // over-age
  double older_than_seconds = 0;
  // memory
  std::uint64_t memory_above_bytes = 0;
  ProcessMatch match;
  ProcessExclusion except;
  unsigned line = 0;  // of its [[rule]] header, for messages
};

struct NotifySettings {
  std::vector<std::string> command;  // argv; empty: no command
  double command_timeout_seconds = 10;
  std::string webhook;               // http:// or https:// URL; empty: none
  double webhook_timeout_seconds = 5;
  std::string webhook_ca_file;       // https: the CAs its certificate is checked against; empty: the system's
};

struct Policy {
  std::string source;  // the file read
  WatchMode mode = WatchMode::DryRun;
  double interval_seconds = 10;
  double full_scan_seconds = 300;  // the whole of /proc again, at least this often
  std::string audit_log;           // "" when the file names none
  double kill_timeout_seconds = 10;
  double verify_timeout_seconds = 30;
  unsigned max_terminations = 3;   // at most this many ended...
  double cap_window_seconds = 0;   // ...in any window this long (0: one interval)
  NotifySettings notify;
  ProcessExclusion exclude;        // for every rule
  std::vector<Rule> rules;

  double cap_window() const { return cap_window_seconds > 0 ? cap_window_seconds : interval_seconds; }
};

// Bounds (docs/watch-policy.example.toml states them).
namespace policy_limits {
inline constexpr double kMinIntervalSeconds = 0.05;
inline constexpr double kMaxIntervalSeconds = 3600;
inline constexpr double kMaxFullScanSeconds = 86400;
inline constexpr double kMaxConditionSeconds = 365 * 86400.0;  // idle_for, older_than
inline constexpr double kMaxGraceSeconds = 7 * 86400.0;
inline constexpr double kMaxTimeoutSeconds = 3600;              // kill, verify, notification timeouts
inline constexpr unsigned kMaxRules = 256;
}  // namespace policy_limits

// "" when every GPU the rules name is among `gpu_uuids` (index -> lower-case UUID, as the
// driver counts them); else one line naming the first that is not, with its place in the file.
std::string check_policy_gpus(const Policy& policy, const std::map<unsigned, std::string>& gpu_uuids);
// The same for the AMD and Intel GPUs the rules name by PCI address, against the host's
// (`pci_addresses`, as sysfs lists them).
std::string check_policy_drm_gpus(const Policy& policy, const std::vector<std::string>& pci_addresses);

// How often watch's quick looks need the driver when the kernel's events bring new holders and
// exits (snapshot/holder_events.hpp): a `memory` rule every look; an `idle` rule at a tenth of
// its idle_for, at most every kMaxDriverReadSeconds (the utilisation samples asked for cover
// the time since the last reading, nvml/driver_reading.hpp); a rule filtered by min_memory
// that often too; orphan, zombie and over-age rules never (their facts are the kernel's; the
// full scans still read the driver). Never less than the interval; infinity: only full scans.
inline constexpr double kMaxDriverReadSeconds = 60;
double driver_read_seconds(const Policy& policy);

std::optional<Policy> parse_policy(std::string_view text, const std::string& source, std::string& error);
std::optional<Policy> load_policy(const std::string& path, std::string& error);

}  // namespace gpureap
