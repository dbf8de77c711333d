// cgroup.kill for a tree that is exactly its own cgroup v2: one write kills every process in
// the cgroup subtree atomically, including any forked after our last sweep — the case a
// SIGSTOP sweep cannot close alone (a child whose parent exits is reparented out of the tree).
// Used only when every process in the subtree is already a member of the tree being killed,
// so nothing else can be hit.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <sys/types.h>

namespace gpureap::killtree {

// Where the unified (v2) hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on
// hybrid hosts), from <proc_root>/self/mountinfo; nullopt when there is none.
std::optional<std::string> cgroup2_mount(const std::string& proc_root);

// The cgroup v2 directory of pid (mount point + the "0::" path of <proc_root>/<pid>/cgroup),
// when a cgroup2 hierarchy is mounted, the path is not the root and it has cgroup.kill.
std::optional<std::string> own_cgroup_dir(const std::string& proc_root, pid_t pid);

// Every PID in the cgroup and its descendant cgroups (cgroup.procs, recursively).
std::vector<pid_t> cgroup_subtree_pids(const std::string& cgroup_dir);

// True when the subtree is not empty, none of its PIDs is in `excluded` (gpureap and its
// ancestors), and each is in `members` or in process group `job_pgid` (a child that escaped
// the tree by being reparented keeps its job's process group; an unrelated process in the
// same cgroup, such as the login shell of a session scope, does not).
bool cgroup_is_exactly(const std::string& proc_root, const std::string& cgroup_dir,
                       const std::unordered_set<pid_t>& members, pid_t job_pgid,
                       const std::unordered_set<pid_t>& excluded);

// Writes "1" to cgroup.kill. Returns 0 or the errno.
int write_cgroup_kill(const std::string& cgroup_dir);

}  // namespace gpureap::killtree
