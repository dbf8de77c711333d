#include "kill/tree_sweep.hpp"

#include <deque>
#include <unordered_map>

#include <unistd.h>

#include "kill/proc_peek.hpp"

namespace gpureap::killtree {
namespace {

// Pins pid if it may be touched; returns its PID when it joins, nullopt otherwise.
bool consider(const std::string& proc_root, pid_t pid, std::unordered_set<pid_t>& known,
              const std::unordered_set<pid_t>& excluded, const FoundFn& found) {
  if (pid <= 1 || known.count(pid) != 0 || excluded.count(pid) != 0) return false;
  const auto stat = killproc::read_stat(proc_root, pid);
  if (!stat || (stat->flags & killproc::kPfKthread) != 0) return false;
  if (stat->state == 'Z' || stat->state == 'X') return false;  // exited: holds nothing
  PinResult pinned = PidRef::pin(pid, stat->start_time_ticks, proc_root);
  if (pinned.status != PinStatus::Ok) return false;
  known.insert(pid);
  found(std::move(pinned.ref), stat->state);
  return true;
}

}  // namespace

std::size_t sweep_once(const std::string& proc_root, const SweepScope& scope,
                       std::unordered_set<pid_t>& known, const std::unordered_set<pid_t>& excluded,
                       const FoundFn& found) {
  std::size_t count = 0;
  if (scope.process_group && *scope.process_group > 1) {
    for (const auto& stat : killproc::scan_stats(proc_root)) {
      if (stat.pgid == *scope.process_group && consider(proc_root, stat.pid, known, excluded, found)) ++count;
    }
  }
  if (!scope.descendants) return count;

  // Breadth-first from every member (and every process found on the way).
  std::deque<pid_t> queue(scope.members.begin(), scope.members.end());
  std::unordered_map<pid_t, std::vector<pid_t>> by_parent;  // filled on first fallback
  bool scanned = false;
  while (!queue.empty()) {
    const pid_t parent = queue.front();
    queue.pop_front();
    auto children = killproc::read_children(proc_root, parent);
    if (!children) {
      if (!scanned) {
        for (const auto& stat : killproc::scan_stats(proc_root)) by_parent[stat.ppid].push_back(stat.pid);
        scanned = true;
      }
      const auto it = by_parent.find(parent);
      children = it == by_parent.end() ? std::vector<pid_t>{} : it->second;
    }
    for (const pid_t child : *children) {
      if (consider(proc_root, child, known, excluded, found)) {
        ++count;
        queue.push_back(child);
      }
    }
  }
  return count;
}

std::unordered_set<pid_t> self_and_ancestors(const std::string& proc_root) {
  std::unordered_set<pid_t> out;
  pid_t pid = ::getpid();
  for (int depth = 0; depth < 4096 && pid > 0 && out.insert(pid).second; ++depth) {
    const auto stat = killproc::read_stat(proc_root, pid);
    if (!stat) break;
    pid = stat->ppid;
  }
  return out;
}

}  // namespace gpureap::killtree
