#include "holders/holder_tracker.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <unordered_set>

#include <fmt/format.h>

#include "proc/proc_parse.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace gpureap::holders {
namespace {

// Missed holders explained until the caller takes them (expected none; a flood is cut here).
constexpr std::size_t kMissedNotesKept = 64;

double monotonic_seconds() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Events name processes by their PID in our namespace; the scans read proc_root. They agree
// only when proc_root is a procfs that shows this namespace ("self" is our PID there).
bool proc_shows_our_pids(const std::string& proc_root, std::string& why) {
  struct statfs fs {};
  if (::statfs(proc_root.c_str(), &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC) {
    why = fmt::format("{} is not a procfs mount", proc_root);
    return false;
  }
  char link[32] = {};
  const ssize_t n = ::readlink((proc_root + "/self").c_str(), link, sizeof link - 1);
  pid_t shown = 0;
  if (n <= 0 || std::from_chars(link, link + n, shown).ec != std::errc() || shown != ::getpid()) {
    why = fmt::format("{} shows another PID namespace than gpureap's: event PIDs cannot be matched to it", proc_root);
    return false;
  }
  return true;
}

// The GPU device nodes under dev_dir that gpureap knows: NVIDIA's (nvidia-caps/ too), DRM's
// card and render nodes, /dev/kfd.
std::vector<std::string> gpu_nodes(const std::string& dev_dir) {
  std::vector<std::string> nodes;
  for (const char* sub : {"", "/nvidia-caps", "/dri"}) {
    const std::string dir = dev_dir + sub;
    const procfs::unique_fd fd = procfs::open_dir_at(AT_FDCWD, dir.c_str(), /*no_follow=*/false);
    if (!fd) continue;
    procfs::DirLister lister;
    lister.for_each(fd.get(), [&](const char* name, unsigned char) {
      const std::string path = dir + "/" + name;
      if (classify_device_path(path, dev_dir) || classify_drm_path(path, dev_dir)) nodes.push_back(path);
      return true;
    });
  }
  return nodes;
}

}  // namespace

HolderTracker::HolderTracker(HolderTrackerOptions options, DeviceOpenEvents device_events,
                             ProcessEvents process_events)
    : options_(std::move(options)),
      device_events_(std::move(device_events)),
      process_events_(std::move(process_events)),
      self_(::getpid()) {}

std::unique_ptr<HolderTracker> HolderTracker::start(HolderTrackerOptions options, std::string& why) {
  if (!proc_shows_our_pids(options.proc_root, why)) return nullptr;
  auto device_events = DeviceOpenEvents::open(&why);
  if (!device_events) return nullptr;
  auto process_events = ProcessEvents::open(&why);
  if (!process_events) return nullptr;
  std::unique_ptr<HolderTracker> tracker(
      new HolderTracker(std::move(options), std::move(*device_events), std::move(*process_events)));
  if (!tracker->mark_nodes(why)) return nullptr;
  return tracker;
}

// A node that cannot be marked (a filesystem without file handles) would hide its openers:
// then no events at all.
bool HolderTracker::mark_nodes(std::string& why) {
  next_node_rescan_ = monotonic_seconds() + options_.node_rescan_seconds;
  for (const std::string& path : gpu_nodes(options_.dev_dir)) {
    struct stat node {};
    if (::lstat(path.c_str(), &node) != 0 || S_ISLNK(node.st_mode)) continue;
    if (!marked_.insert({node.st_dev, node.st_ino}).second) continue;
    if (!device_events_.mark(path, &why)) return false;
    // A new node may have been opened before its mark: only a walk can tell.
    if (walked_) needs_walk_ = true;
  }
  counts_.nodes_marked = marked_.size();
  return true;
}

void HolderTracker::take(pid_t pid, procfs::unique_fd pidfd) {
  std::string why;
  auto pinned = procfs::PinnedProcess::adopt(options_.proc_root, pid, std::move(pidfd), why);
  if (!pinned) {
    if (tracked_.erase(pid) > 0) let_go_.insert(pid);
    dirty_.erase(pid);
    return;
  }
  tracked_.insert_or_assign(pid, std::move(*pinned));
  dirty_.insert(pid);
}

void HolderTracker::take_by_pid(pid_t pid) {
  procfs::unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u)));
  if (!pidfd) return;  // exited already
  take(pid, std::move(pidfd));
}

void HolderTracker::refresh() {
  if (monotonic_seconds() >= next_node_rescan_) {
    std::string why;
    if (!mark_nodes(why)) needs_walk_ = true;  // that node's openers only a walk sees
  }
  // The process events are read before the opens and applied after them: a fork read here
  // has its parent's open (which came before it) in the device batch read below, so a holder's
  // child is followed even when the open and the fork fall between the two reads.
  process_batch_.exits.clear();
  process_batch_.forks.clear();
  process_batch_.execs.clear();
  process_batch_.credentials.clear();
  process_batch_.lost = false;
  process_events_.drain(process_batch_);
  journal_.next_batch(JournalRead::ProcessEvents);
  if (options_.between_reads) options_.between_reads();
  device_batch_.events.clear();
  device_batch_.overflowed = false;
  device_events_.drain(device_batch_);
  journal_.next_batch(JournalRead::Opens);
  counts_.device_events += device_batch_.events.size();
  // Whose forks are followed in this batch: the holders, and every opener read in it, tracked
  // or not: one that had exited (no pidfd) or could no longer be pinned by the time its event
  // was read may have children that still hold what it opened. Following only makes a
  // candidate: each child is pinned and proven by its own descriptors.
  std::unordered_set<pid_t> followed;
  for (DeviceOpen& event : device_batch_.events) {
    if (event.pid <= 0 || event.pid == self_) continue;  // outside our namespace, or our own NVML
    followed.insert(event.pid);
    journal_.add({JournalKind::Open, event.pid, 0, event.pidfd.get() >= 0});
    details_changed_.insert(event.pid);
    if (event.pidfd) {
      take(event.pid, std::move(event.pidfd));
    } else if (tracked_.count(event.pid) > 0) {
      dirty_.insert(event.pid);  // it has exited: the proof lets it go
    }
  }
  for (const ProcessFork& fork : process_batch_.forks) {  // in the order they happened
    if (fork.child == self_) continue;
    const bool follow =
        tracked_.count(fork.parent) > 0 || followed.count(fork.parent) > 0 || carried_.count(fork.parent) > 0;
    journal_.add({JournalKind::Fork, fork.child, fork.parent, follow});
    if (!follow) continue;
    if (tracked_.count(fork.parent) > 0) files_changed_.insert(fork.parent);
    followed.insert(fork.child);  // its own forks are followed too, even if it is gone
    take_by_pid(fork.child);
    ++counts_.forks_followed;
  }
  for (const pid_t pid : process_batch_.execs) {
    journal_.add({JournalKind::Exec, pid, 0, tracked_.count(pid) > 0});
    if (tracked_.count(pid) == 0) continue;
    dirty_.insert(pid);
    details_changed_.insert(pid);
  }
  for (const pid_t pid : process_batch_.credentials) {
    if (tracked_.count(pid) > 0) details_changed_.insert(pid);
  }
  for (const ProcessExit& exit : process_batch_.exits) {
    journal_.add({JournalKind::Exit, exit.pid, 0, tracked_.count(exit.pid) > 0});
    if (tracked_.count(exit.pid) > 0) dirty_.insert(exit.pid);
  }
  if (device_batch_.overflowed || process_batch_.lost) {
    ++counts_.lost;
    needs_walk_ = true;
  }
  prove_dirty();
  followed.merge(let_go_);
  let_go_.clear();
  carried_ = std::move(followed);
}

void HolderTracker::prove_dirty() {
  std::vector<DeviceFileHandle> held;
  for (const pid_t pid : dirty_) {
    const auto it = tracked_.find(pid);
    if (it == tracked_.end()) continue;
    ++counts_.proofs;
    const procfs::FdProbe seen = it->second.device_files(options_.dev_dir, held);
    // Denied: not ours to read (never as root); kept, as the scan would list it unread.
    if (seen != procfs::FdProbe::DeviceFile && seen != procfs::FdProbe::Denied) {
      journal_.add({JournalKind::LetGo, pid, 0, seen == procfs::FdProbe::Gone});
      let_go_.insert(pid);
      tracked_.erase(it);
    }
  }
  dirty_.clear();
}

std::vector<pid_t> HolderTracker::take_details_changed() {
  std::vector<pid_t> pids(details_changed_.begin(), details_changed_.end());
  details_changed_.clear();
  return pids;
}

std::vector<pid_t> HolderTracker::take_files_changed() {
  std::vector<pid_t> pids(files_changed_.begin(), files_changed_.end());
  files_changed_.clear();
  return pids;
}

std::vector<pid_t> HolderTracker::holders() const {
  std::vector<pid_t> pids;
  pids.reserve(tracked_.size());
  for (const auto& [pid, pinned] : tracked_) pids.push_back(pid);
  std::sort(pids.begin(), pids.end());
  return pids;
}

std::vector<std::string> HolderTracker::take_missed_notes() {
  std::vector<std::string> notes;
  notes.swap(missed_notes_);
  return notes;
}

std::vector<std::pair<pid_t, std::uint64_t>> HolderTracker::holders_started() const {
  std::vector<std::pair<pid_t, std::uint64_t>> out;
  out.reserve(tracked_.size());
  for (const auto& [pid, pinned] : tracked_) out.emplace_back(pid, pinned.start_time_ticks());
  return out;
}

void HolderTracker::reconcile(std::span<const pid_t> walked_pids) {
  std::vector<pid_t> walked(walked_pids.begin(), walked_pids.end());
  std::sort(walked.begin(), walked.end());
  std::vector<pid_t> new_here;
  for (const pid_t pid : walked) {
    if (pid == self_ || tracked_.count(pid) > 0) continue;
    take_by_pid(pid);
    if (tracked_.count(pid) > 0) new_here.push_back(pid);
  }
  // What is here and the walk did not find: proven again (an open since the walk keeps it).
  for (const auto& [pid, pinned] : tracked_) {
    if (!std::binary_search(walked.begin(), walked.end(), pid)) dirty_.insert(pid);
  }
  prove_dirty();
  if (walked_) {
    // Counted once proven: a holder that has exited since the walk cannot be told from one
    // whose open and exit the events both reported.
    for (const pid_t pid : new_here) {
      if (tracked_.count(pid) == 0) continue;
      ++counts_.missed;
      if (missed_notes_.size() < kMissedNotesKept) missed_notes_.push_back(journal_.explain(pid));
    }
  }
  ++counts_.walks;
  walked_ = true;
  needs_walk_ = false;
}

}  // namespace gpureap::holders
