// The snapshot's side of the event-kept holder set (holders/holder_tracker.hpp): before a scan
// in the Holders scope, the PIDs to read instead of walking /proc; after it, a walk's holders
// to reconcile with. A walk is due at the first scan, every reconcile interval, whenever the
// kernel dropped events, and at every scan where events cannot be had (why, in
// `fallback_reason`, for the caller to say once). The events are listened to from the first
// scan on. One object serves every SnapshotSource made from the same options (a source made
// again does not lose the set), one call at a time. While events are heard, the holders'
// details (command line, executable, user ids, container, mapped libraries) are kept between
// scans of the same process (PID and start time) and read again when its events say they may
// have changed (an exec, new credentials, an open), and every few scans regardless (a command
// line rewritten in place, a move to another cgroup make no event). With them each holder's GPU
// descriptors are kept, and a scan between walks checks only those (proc/fd_look_memory.hpp):
// fd/ is listed in full at the same cadence, at every walk, and after any event on the holder
// (those above, or a fork).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sys/types.h>

#include "holders/holder_tracker.hpp"
#include "proc/fd_look_memory.hpp"
#include "proc/process_table.hpp"

namespace gpureap {

struct HolderEventsState {
  bool active = false;          // the holder set comes from events
  std::string fallback_reason;  // why not, when not (one line)
  bool walked = false;          // this snapshot walked /proc (a reconciliation, or no events)
  holders::HolderEventCounts counts;
  // The holders this snapshot's walk found that the events had missed, each explained (what
  // the events said of it and its parent): to be logged by whoever shows the snapshot.
  std::vector<std::string> missed_notes;
  // The event-kept holders as the last scan was given them (sorted; what changed_since_scan
  // compares with): while events are heard, the end of any of them makes it true (watch's looks
  // rely on it).
  std::vector<pid_t> holders;
};

// GPUREAP_HOLDER_EVENTS=off: every scan walks, as without the capability (the polling
// reference of bench/holder_events.sh, and a way around a kernel whose events misbehave).
// Unset, empty or "on": events (an empty answer). Any other value walks too, and the answer
// names it: walking is never wrong, only slower.
std::string holder_events_turned_off();

class HolderEvents {
 public:
  explicit HolderEvents(double reconcile_seconds);
  ~HolderEvents();
  HolderEvents(const HolderEvents&) = delete;
  HolderEvents& operator=(const HolderEvents&) = delete;

  // Reads the events; the PIDs a scan of `proc` is to read, or null when it must walk. What the
  // events changed is forgotten in proc.memory when the caller keeps one, else in details_memory.
  std::shared_ptr<const std::vector<pid_t>> before_scan(const ProcScanOptions& proc);
  // After a scan before_scan asked to walk: its holders reconcile the set.
  void after_walk(const ProcessTable& table);
  // Reads the events; whether the holder set differs from what the last scan was given.
  bool changed_since_scan();
  HolderEventsState state() const;
  // What to poll to hear of events: the opens (fanotify), then the forks and exits (the
  // connector); none without them, or before the first scan.
  std::vector<int> event_fds() const;
  // Whether the first scan has tried to listen (event_fds then tells whether it could).
  bool started() const;
  // Reads the queued events into the set (holder_event_drain.hpp reads them as they come).
  void read_events();
  // The memory a scan of the holders keeps their details in; null without events (each scan
  // then reads them all). For the scan that follows before_scan, on the same thread.
  std::shared_ptr<FdLookMemory> details_memory() const;

 private:
  void start(const ProcScanOptions& proc);

  mutable std::mutex mutex_;
  bool started_ = false;
  std::unique_ptr<holders::HolderTracker> tracker_;
  std::chrono::steady_clock::duration reconcile_every_;
  std::chrono::steady_clock::time_point next_walk_{};
  HolderEventsState state_;
  std::shared_ptr<FdLookMemory> details_;
};

}  // namespace gpureap
