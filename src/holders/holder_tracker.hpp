// The processes that hold a GPU device file, kept from the kernel's events between walks of
// /proc: fanotify reports every open of a marked node with the opener's pidfd
// (device_open_events.hpp), the process-events connector every fork, exec and exit
// (process_events.hpp). A process joins on its open, or on a fork by a process already here
// (the child inherits the descriptors); an exec, an exit or a last close makes it be proven
// again. Every process here is pinned (its pidfd and /proc/<pid> directory) and proven by its
// fd/ directory read through that pin, never by the event alone: an open may be closed again at
// once, a close or exec may leave other descriptors. What events cannot show, a walk must: a
// descriptor received over a Unix socket (SCM_RIGHTS makes no open), anything while events were
// lost (a queue overflowed), the holders from before we listened. reconcile() takes a walk's
// answer and counts what the events had missed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <sys/types.h>

#include "holders/device_open_events.hpp"
#include "holders/event_journal.hpp"
#include "holders/process_events.hpp"
#include "proc/pinned_process.hpp"

namespace gpureap::holders {

struct HolderTrackerOptions {
  std::string proc_root = "/proc";
  std::string dev_dir = "/dev";  // where the GPU device nodes are (GPUREAP_DEV_DIR in tests)
  // How often the device directory is read again for nodes that appeared (hot-plug, MIG).
  double node_rescan_seconds = 10;
  // A test's seam: called in refresh between the read of the process events and that of the
  // opens, where a fork and an exit can fall that the next refresh reads.
  std::function<void()> between_reads;
};

struct HolderEventCounts {
  std::uint64_t device_events = 0;  // fanotify events read
  std::uint64_t forks_followed = 0;  // children of holders taken in
  std::uint64_t proofs = 0;          // fd/ directories read to prove a process
  std::uint64_t walks = 0;           // reconciliations with a full walk
  std::uint64_t missed = 0;          // holders a walk found that the events had not (expected 0)
  std::uint64_t lost = 0;            // times the kernel dropped events (a queue overflowed)
  std::size_t nodes_marked = 0;      // device nodes watched now
};

class HolderTracker {
 public:
  // Listens to both event sources and marks every GPU node under dev_dir; nullptr with the
  // reason (one line) when this host, these privileges or this /proc cannot give events that
  // name the processes the scans read.
  static std::unique_ptr<HolderTracker> start(HolderTrackerOptions options, std::string& why);

  // Reads every queued event and proves each process they touched. Marks nodes that appeared.
  void refresh();
  // True until the first reconcile, and from events lost until the next: the set is then
  // not to be trusted alone, and a walk must be done.
  bool needs_walk() const { return needs_walk_; }
  // The proven holders, sorted.
  std::vector<pid_t> holders() const;
  bool tracks(pid_t pid) const { return tracked_.count(pid) > 0; }
  // The proven holders with the start time each was pinned at (a PID reused is another process).
  std::vector<std::pair<pid_t, std::uint64_t>> holders_started() const;
  // The holders whose details (command line, executable, user ids, mapped libraries) may have
  // changed since the last call: each one that ran exec, changed its credentials or opened a
  // device node. A scan that keeps details between looks reads theirs again.
  std::vector<pid_t> take_details_changed();
  // The holders whose descriptors a scan is to list in full, not only check those it knew
  // (proc/fd_look_memory.hpp), since the last call: each one that forked (a child made with
  // CLONE_FILES shares its table); those of take_details_changed are listed in full too.
  std::vector<pid_t> take_files_changed();
  // After a walk of /proc (and a refresh after it) that found `walked` holding device files:
  // takes in, proven, those the events did not bring (counted as missed but at the first walk),
  // and proves again those here that the walk did not find.
  void reconcile(std::span<const pid_t> walked_pids);

  const HolderEventCounts& counts() const { return counts_; }
  // For each holder a walk found that the events had missed since the last call: what the
  // events said of it and of its parent, and when they were read (event_journal.hpp).
  std::vector<std::string> take_missed_notes();
  // What to poll for events: the fanotify group and the connector socket.
  int device_events_fd() const { return device_events_.fd(); }
  int process_events_fd() const { return process_events_.fd(); }

 private:
  HolderTracker(HolderTrackerOptions options, DeviceOpenEvents device_events, ProcessEvents process_events);
  bool mark_nodes(std::string& why);
  void take(pid_t pid, procfs::unique_fd pidfd);
  void take_by_pid(pid_t pid);
  void prove_dirty();

  HolderTrackerOptions options_;
  DeviceOpenEvents device_events_;
  ProcessEvents process_events_;
  pid_t self_ = 0;
  std::unordered_map<pid_t, procfs::PinnedProcess> tracked_;
  std::set<pid_t> dirty_;  // to prove before the next answer
  // Whose forks the next refresh follows besides the holders: this refresh's openers and
  // followed children, and the holders let go since. A fork read in the next batch may come
  // from one of them: it fell between this refresh's two reads, or before its proof.
  std::unordered_set<pid_t> carried_;
  std::unordered_set<pid_t> let_go_;
  EventJournal journal_;
  std::vector<std::string> missed_notes_;
  std::set<pid_t> details_changed_;  // for take_details_changed
  std::set<pid_t> files_changed_;    // for take_files_changed
  std::set<std::pair<dev_t, ino_t>> marked_;
  double next_node_rescan_ = 0;
  bool needs_walk_ = true;
  bool walked_ = false;
  HolderEventCounts counts_;
  DeviceOpenBatch device_batch_;
  ProcessEventBatch process_batch_;
};

}  // namespace gpureap::holders
