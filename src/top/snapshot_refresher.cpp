#include "top/snapshot_refresher.hpp"

namespace gpureap {

SnapshotRefresher::SnapshotRefresher(SnapshotOptions options, std::chrono::milliseconds interval)
    : source_(std::move(options)), interval_(interval), thread_([this] { run(); }) {}

SnapshotRefresher::~SnapshotRefresher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

std::unique_ptr<Snapshot> SnapshotRefresher::take_latest() {
  wake_.drain();
  std::lock_guard lock(mutex_);
  return std::move(latest_);
}

void SnapshotRefresher::refresh_now() {
  {
    std::lock_guard lock(mutex_);
    now_ = true;
  }
  changed_.notify_all();
}

void SnapshotRefresher::run() {
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    std::unique_ptr<Snapshot> snapshot;
    try {
      snapshot = source_.take();
    } catch (const std::exception&) {
      // /proc could not be opened: nothing to show this round; the next may succeed.
    }
    std::unique_lock lock(mutex_);
    if (snapshot) {
      latest_ = std::move(snapshot);  // an older one not yet shown is dropped
      wake_.notify();
    }
    now_ = false;
    changed_.wait_until(lock, started + interval_, [this] { return stop_ || now_; });
    if (stop_) return;
  }
}

}  // namespace gpureap
