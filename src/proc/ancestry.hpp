// The one walk up a process tree, over whatever knows parents: a ProcessTable, a scan that
// reads the next parent as it goes, a job's member list.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <vector>

namespace gpureap {

// Deeper than any real tree; the walk stops there, so that stat files read at different
// moments that show a ppid cycle (a parent's PID taken by a child of its child) cannot hold it.
inline constexpr std::size_t kAncestryBound = 4096;

// pid, its parent, grandparent ... up to and including PID 1, or the first PID whose parent is
// not known: parent_of(pid) gives the parent's PID, or nullopt when pid is not known. It is
// asked once for every PID of the chain, in order, PID 1 and that last unknown one included.
template <typename ParentOf>
std::vector<pid_t> ancestry_walk(pid_t pid, ParentOf&& parent_of) {
  std::vector<pid_t> chain{pid};
  for (;;) {
    const std::optional<pid_t> parent = parent_of(pid);
    if (pid == 1 || !parent || *parent <= 0 || chain.size() >= kAncestryBound) return chain;
    pid = *parent;
    chain.push_back(pid);
  }
}

}  // namespace gpureap
