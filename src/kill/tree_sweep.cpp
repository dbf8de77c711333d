#include "kill/tree_sweep.hpp"

#include <deque>
#include <unordered_map>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "kill/cgroup_kill.hpp"
#include "proc/pid_files.hpp"
#include "proc/proc_io.hpp"

namespace gpureap::sweep {
namespace {

struct Callbacks {
  std::size_t& pin_budget;
  const PinFailedFn& failed;
};

// What a lead must still show once pinned, read through the pin: under whom it was found.
using StillBelongsFn = std::function<bool(const PidRef& pinned, const StatFields& pinned_stat)>;

struct Found {
  PidRef ref;
  char state = '?';
};

// Pins pid if it may be touched and keeps it when `still_belongs` holds for a read made
// through the pin; true when it joins (appended to `out`).
bool consider(const std::string& proc_root, pid_t pid, std::unordered_set<pid_t>& known,
              const std::unordered_set<pid_t>& excluded, const Callbacks& call, const StillBelongsFn& still_belongs,
              std::deque<Found>& out) {
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
  if (pinned.status == PinStatus::Error || pinned.status == PinStatus::Unsupported) {
    known.insert(pid);  // reported once, not on every sweep
    if (call.failed) call.failed(pid, pinned);
    return false;
  }
  if (pinned.status != PinStatus::Ok) return false;  // exited, or the PID was reused meanwhile
  // The lead was read by bare PID: only a read through the pin says whose it is now.
  const auto again = pinned.ref.read_stat(proc_root);
  if (!again || again->state == 'Z' || again->state == 'X' || !still_belongs(pinned.ref, *again)) return false;
  --call.pin_budget;
  known.insert(pid);
  out.push_back(Found{std::move(pinned.ref), again->state});
  return true;
}

bool lives(const PidRef* ref) { return ref != nullptr && ref->valid() && !ref->has_exited(); }

// A living member whose pinned read shows it in `group`: while it lives, the group's ID
// cannot be given to another group.
const PidRef* group_anchor(const std::string& proc_root, const std::vector<const PidRef*>& living, pid_t group) {
  for (const PidRef* ref : living) {
    const auto stat = ref->read_stat(proc_root);
    if (stat && stat->pgid == group) return ref;
  }
  return nullptr;
}

// What every lead of one sweep is checked against, and where its pin counts.
struct SweepContext {
  const std::string& proc_root;
  std::unordered_set<pid_t>& known;
  const std::unordered_set<pid_t>& excluded;
  const Callbacks& call;

  bool consider(pid_t pid, const StillBelongsFn& still_belongs, std::deque<Found>& out) const {
    return sweep::consider(proc_root, pid, known, excluded, call, still_belongs, out);
  }
};

// Every process in `group`, kept while a living member still anchors the group's ID.
void join_group(const SweepContext& sweep, pid_t group, const std::vector<const PidRef*>& living,
                std::deque<Found>& joined) {
  const PidRef* anchor = group_anchor(sweep.proc_root, living, group);
  if (anchor == nullptr) return;
  const StillBelongsFn in_group = [&](const PidRef&, const StatFields& pinned) {
    if (pinned.pgid != group || !lives(anchor)) return false;
    const auto anchor_stat = anchor->read_stat(sweep.proc_root);
    return anchor_stat && anchor_stat->pgid == group;
  };
  for (const auto& stat : procfs::scan_stats(sweep.proc_root)) {
    if (stat.pgid == group) sweep.consider(stat.pid, in_group, joined);
  }
}

// A process's children as its children file lists them; where that cannot be read, from one
// scan of every process's parent, made on the first such failure. Each list goes to the
// scope's after_read before any of it is pinned.
class ChildLister {
 public:
  ChildLister(const std::string& proc_root, const SweepScope& scope) : proc_root_(proc_root), scope_(scope) {}

  std::vector<pid_t> operator()(const PidRef& parent) {
    auto children = read(parent);
    if (scope_.after_read) scope_.after_read(children);
    return children;
  }

 private:
  std::vector<pid_t> read(const PidRef& parent) {
    auto children = procfs::read_children(proc_root_, parent.pid());
    if (children) return std::move(*children);
    if (!scanned_) {
      for (const auto& stat : procfs::scan_stats(proc_root_)) by_parent_[stat.ppid].push_back(stat.pid);
      scanned_ = true;
    }
    const auto it = by_parent_.find(parent.pid());
    return it == by_parent_.end() ? std::vector<pid_t>{} : it->second;
  }

  const std::string& proc_root_;
  const SweepScope& scope_;
  std::unordered_map<pid_t, std::vector<pid_t>> by_parent_;
  bool scanned_ = false;
};

// One step of the depth-first walk: a process, its children as read, and the next to look at.
struct Frame {
  const PidRef* root = nullptr;
  Found owned;
  std::vector<pid_t> children;
  std::size_t next = 0;
  const PidRef& ref() const { return root != nullptr ? *root : owned.ref; }
};

// Depth-first from a living member: a found process's children are looked at before its next
// sibling is pinned, and it is handed over once they have been, so that only the path being
// walked holds descriptors (a caller that drops what it is handed walks any width of tree
// under a low open-file limit). Returns how many were handed over.
std::size_t walk_descendants(const SweepContext& sweep, const PidRef* root, ChildLister& children_of,
                             const FoundFn& found) {
  std::size_t count = 0;
  std::vector<Frame> stack;
  stack.push_back(Frame{root, {}, children_of(*root), 0});
  while (!stack.empty()) {
    Frame& top = stack.back();
    const PidRef& parent = top.ref();
    // A parent that exited hands its children to its reaper: they are no longer the plan's.
    if (top.next < top.children.size() && lives(&parent)) {
      const pid_t child = top.children[top.next++];
      // Still the child of this parent, read through the child's pin, while the parent
      // lives (a living parent's PID names no one else).
      const StillBelongsFn under_parent = [&](const PidRef&, const StatFields& pinned) {
        return pinned.ppid == parent.pid() && lives(&parent);
      };
      std::deque<Found> one;
      if (sweep.consider(child, under_parent, one)) {
        Frame frame{nullptr, std::move(one.front()), {}, 0};
        frame.children = children_of(frame.owned.ref);
        stack.push_back(std::move(frame));  // `top` and `parent` are not used past here
      }
      continue;
    }
    Frame done = std::move(stack.back());
    stack.pop_back();
    if (done.root == nullptr) {
      ++count;
      found(std::move(done.owned.ref), done.owned.state);
    }
  }
  return count;
}

}  // namespace

std::size_t sweep_once(const std::string& proc_root, const SweepScope& scope,
                       std::unordered_set<pid_t>& known, const std::unordered_set<pid_t>& excluded,
                       std::size_t& pin_budget, const FoundFn& found, const PinFailedFn& failed) {
  const Callbacks call{pin_budget, failed};
  const SweepContext sweep{proc_root, known, excluded, call};
  std::vector<const PidRef*> living;
  for (const PidRef* ref : scope.members) {
    if (lives(ref)) living.push_back(ref);
  }
  if (living.empty()) return 0;  // nothing of the target lives: every PID read now is a stranger's
  std::deque<Found> joined;       // the group's finds
  if (scope.process_group && *scope.process_group > 1) join_group(sweep, *scope.process_group, living, joined);

  // A group's finds are walked from on the next sweep, as members.
  std::size_t count = joined.size();
  for (Found& f : joined) found(std::move(f.ref), f.state);
  if (!scope.descendants) return count;
  ChildLister children_of(proc_root, scope);
  for (const PidRef* root : living) count += walk_descendants(sweep, root, children_of, found);
  return count;
}

bool pinned_in_cgroup(const std::string& proc_root, const PidRef& pinned, const std::string& cgroup_dir) {
  const auto mount = cgroupfs::cgroup2_mount(proc_root);
  if (!mount) return false;
  // Read after the pin, then the pin read again: the cgroup file named the pinned process.
  const auto path = procfs::read_cgroup_v2_path(proc_root, pinned.pid());
  if (!path) return false;
  const std::string dir = *mount + *path;
  const bool inside = dir == cgroup_dir || dir.rfind(cgroup_dir + "/", 0) == 0;
  return inside && pinned.read_stat(proc_root).has_value() && lives(&pinned);
}

std::size_t pin_cgroup_members(const std::string& proc_root, const std::string& cgroup_dir,
                               const std::vector<pid_t>& pids, std::unordered_set<pid_t>& known,
                               const std::unordered_set<pid_t>& excluded, std::size_t& pin_budget,
                               const FoundFn& found, const PinFailedFn& failed) {
  const Callbacks call{pin_budget, failed};
  const StillBelongsFn in_cgroup = [&](const PidRef& pinned, const StatFields&) {
    return pinned_in_cgroup(proc_root, pinned, cgroup_dir);
  };
  std::deque<Found> joined;
  for (const pid_t pid : pids) consider(proc_root, pid, known, excluded, call, in_cgroup, joined);
  for (Found& f : joined) found(std::move(f.ref), f.state);
  return joined.size();
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

}  // namespace gpureap::sweep
