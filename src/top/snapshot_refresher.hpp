// The view's snapshots, taken on a thread of their own every interval with the driver kept
// initialised between them (SnapshotSource): a slow /proc or a hung driver call never
// freezes the keys or the screen. The loop takes the newest one when woken.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "snapshot/snapshot.hpp"
#include "proc/wake_signal.hpp"

namespace gpureap {

class SnapshotRefresher {
 public:
  SnapshotRefresher(SnapshotOptions options, std::chrono::milliseconds interval);
  ~SnapshotRefresher();  // stops after the snapshot in progress
  SnapshotRefresher(const SnapshotRefresher&) = delete;
  SnapshotRefresher& operator=(const SnapshotRefresher&) = delete;

  int fd() const { return wake_.fd(); }
  // The newest snapshot not yet taken, or null. Clears the wake-up.
  std::unique_ptr<Snapshot> take_latest();
  // The next snapshot now rather than at the end of the interval (after a kill).
  void refresh_now();

 private:
  void run();

  SnapshotSource source_;
  std::chrono::milliseconds interval_;
  WakeSignal wake_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::unique_ptr<Snapshot> latest_;
  bool stop_ = false;
  bool now_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace gpureap
