// The one verified walk over a living process's descendants and process group, used by every
// sweep (kill's ladder, run's job members, reap, watch, top). A PID read from a children file,
// a ppid scan or a pgid scan is only a lead: it is pinned (pidfd, start time checked), and
// then read again through the pin; it is kept only when that read still shows it under the
// pinned member it was found under (its ppid, or in group mode its pgid), and that member's
// pidfd still says it lives. A stranger that took a finished member's PID, or the child of
// such a stranger, therefore never joins. The walk starts only from members whose pidfd has
// not signalled exit, and a process group is scanned only while a living member still has it.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <sys/types.h>

#include "kill/pid_ref.hpp"

namespace gpureap::sweep {

struct SweepScope {
  std::vector<const PidRef*> members;  // pinned processes of this target; exited ones are skipped
  bool descendants = false;           // follow children (recursively)
  std::optional<pid_t> process_group;  // also every process with this pgid
  // Called with each children file's PIDs as read, before any of them is pinned: the one place
  // a test can put a stranger on a member's PID between the read and the pin.
  std::function<void(const std::vector<pid_t>& read)> after_read;
};

// Called for each new process, pinned and verified, once the walk no longer needs it (after its
// own children were looked at); `state` is its stat state read through the pin. It may not
// invalidate the PidRefs given in the scope.
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

// Is the pinned process, living, in cgroup_dir or a cgroup below it? /proc/<pid>/cgroup is read
// after the pin and the pin checked after the read, so the answer is about the pinned process.
bool pinned_in_cgroup(const std::string& proc_root, const PidRef& pinned, const std::string& cgroup_dir);

// The members of a cgroup v2 subtree, from PIDs read out of its cgroup.procs files: each is
// pinned, and kept only when its /proc/<pid>/cgroup, read after the pin, names cgroup_dir or a
// cgroup below it and the pin still names a living process. Same `known`, `excluded`,
// budget and callbacks as sweep_once. Returns how many joined.
std::size_t pin_cgroup_members(const std::string& proc_root, const std::string& cgroup_dir,
                               const std::vector<pid_t>& pids, std::unordered_set<pid_t>& known,
                               const std::unordered_set<pid_t>& excluded, std::size_t& pin_budget,
                               const FoundFn& found, const PinFailedFn& failed);

// How many pidfds this process may still open, leaving `reserve` descriptors free for reads.
std::size_t pidfd_budget(std::size_t reserve = 32);

// gpureap's own PID and all its ancestors up to PID 1, as seen in proc_root.
std::unordered_set<pid_t> self_and_ancestors(const std::string& proc_root);

}  // namespace gpureap::sweep
