// Finding the processes that belong to a target while it is being killed: its descendants
// (from /proc/<pid>/task/<tid>/children, or a scan of ppids where the kernel lacks that file)
// and the members of its process group (a scan of pgids). Each new process is pinned (pidfd,
// then its start time checked) the moment it is found, and handed to the caller at once so
// that it can be stopped before the next one is looked for. Internal to src/kill.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <sys/types.h>

#include "kill/pid_ref.hpp"

namespace gpureap::killtree {

struct SweepScope {
  std::vector<pid_t> members;         // processes already pinned for this target
  bool descendants = false;           // follow children (recursively)
  std::optional<pid_t> process_group;  // also every process with this pgid
};

// Called for each new process, already pinned; `state` is its stat state when found.
using FoundFn = std::function<void(PidRef ref, char state)>;
// Called for a process of the scope that could not be pinned for another reason than its
// exit (EMFILE, ENFILE, no pidfd_open...): it cannot be signalled and must be reported.
using PinFailedFn = std::function<void(pid_t pid, const PinResult& failure)>;

// One sweep. `known` holds every PID already handled (and is extended with those found);
// `excluded` holds PIDs never to touch (gpureap itself and its ancestors). PID <= 1, kernel
// threads, zombies and processes that vanish before they are pinned are skipped; a failed
// pin goes to `failed` (and into `known`). Returns how many new processes were found.
// `pin_budget` is how many more pidfds may be opened (keeping room for the reads of /proc
// the sweep itself needs): a process found once it is spent fails as EMFILE.
std::size_t sweep_once(const std::string& proc_root, const SweepScope& scope,
                       std::unordered_set<pid_t>& known, const std::unordered_set<pid_t>& excluded,
                       std::size_t& pin_budget, const FoundFn& found, const PinFailedFn& failed);

// How many pidfds this process may still open, leaving `reserve` descriptors free for reads.
std::size_t pidfd_budget(std::size_t reserve = 32);

// gpureap's own PID and all its ancestors up to PID 1, as seen in proc_root.
std::unordered_set<pid_t> self_and_ancestors(const std::string& proc_root);

}  // namespace gpureap::killtree
