#include "kill/tree_sweep.hpp"

#include <deque>
#include <unordered_map>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "proc/pid_files.hpp"
#include "proc/proc_io.hpp"

namespace gpureap::killtree {
namespace {

struct Callbacks {
  std::size_t& pin_budget;
  const FoundFn& found;
  const PinFailedFn& failed;
};

// Pins pid if it may be touched; true when it joins.
bool consider(const std::string& proc_root, pid_t pid, std::unordered_set<pid_t>& known,
              const std::unordered_set<pid_t>& excluded, const Callbacks& call) {
  if (pid <= 1 || known.count(pid) != 0 || excluded.count(pid) != 0) return false;
  const auto stat = procfs::read_stat(proc_root, pid);
  if (!stat || (stat->flags & kPfKthread) != 0) return false;
  if (stat->state == 'Z' || stat->state == 'X') return false;  // exited: holds nothing
  PinResult pinned;
  if (call.pin_budget == 0) {
    pinned.status = PinStatus::Error;
    pinned.error = EMFILE;
  } else {
    pinned = PidRef::pin(pid, stat->start_time_ticks, proc_root);
  }
  if (pinned.status == PinStatus::Ok) --call.pin_budget;
  if (pinned.status == PinStatus::Error || pinned.status == PinStatus::Unsupported) {
    known.insert(pid);  // reported once, not on every sweep
    if (call.failed) call.failed(pid, pinned);
    return false;
  }
  if (pinned.status != PinStatus::Ok) return false;  // exited, or the PID was reused meanwhile
  known.insert(pid);
  call.found(std::move(pinned.ref), stat->state);
  return true;
}

}  // namespace

std::size_t sweep_once(const std::string& proc_root, const SweepScope& scope,
                       std::unordered_set<pid_t>& known, const std::unordered_set<pid_t>& excluded,
                       std::size_t& pin_budget, const FoundFn& found, const PinFailedFn& failed) {
  const Callbacks call{pin_budget, found, failed};
  std::size_t count = 0;
  if (scope.process_group && *scope.process_group > 1) {
    for (const auto& stat : procfs::scan_stats(proc_root)) {
      if (stat.pgid == *scope.process_group && consider(proc_root, stat.pid, known, excluded, call)) ++count;
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
    auto children = procfs::read_children(proc_root, parent);
    if (!children) {
      if (!scanned) {
        for (const auto& stat : procfs::scan_stats(proc_root)) by_parent[stat.ppid].push_back(stat.pid);
        scanned = true;
      }
      const auto it = by_parent.find(parent);
      children = it == by_parent.end() ? std::vector<pid_t>{} : it->second;
    }
    for (const pid_t child : *children) {
      if (consider(proc_root, child, known, excluded, call)) {
        ++count;
        queue.push_back(child);
      }
    }
  }
  return count;
}

std::size_t pidfd_budget(std::size_t reserve) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  std::size_t open = 0;  // descriptors in use now
  if (const procfs::unique_fd dir = procfs::open_dir_at(AT_FDCWD, "/proc/self/fd", false)) {
    procfs::DirLister lister;
    lister.for_each(dir.get(), [&](const char*, unsigned char) {
      ++open;
      return true;
    });
  }
  const auto cap = static_cast<std::size_t>(limit.rlim_cur);
  return cap > open + reserve ? cap - open - reserve : 0;
}

std::unordered_set<pid_t> self_and_ancestors(const std::string& proc_root) {
  std::unordered_set<pid_t> out;
  pid_t pid = ::getpid();
  for (int depth = 0; depth < 4096 && pid > 0 && out.insert(pid).second; ++depth) {
    const auto stat = procfs::read_stat(proc_root, pid);
    if (!stat) break;
    pid = stat->ppid;
  }
  return out;
}

}  // namespace gpureap::killtree
