#include "exporter/shared_collection.hpp"

#include <exception>

#include "metrics/text_format.hpp"

namespace gpureap {

SharedCollection::SharedCollection(Collector& collector, Clock::duration max_age,
                                   std::function<void(const std::string&)> on_failure)
    : collector_(collector), max_age_(max_age), on_failure_(std::move(on_failure)), thread_([this] { run(); }) {}

SharedCollection::~SharedCollection() {
  stop(std::chrono::hours(24 * 365));  // the owner decided to wait; stop(grace) first to bound it
}

std::optional<CollectionResult> SharedCollection::get(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  // A holder that came or went since is worth a collection (cheap with events) at once.
  if (latest_ && Clock::now() - latest_at_ <= max_age_ && !collector_.changed_since_collection()) return latest_;
  bool fresh = false;
  if (!stopping_) {
    // The collection running now (begun within a collection's time) or the next one: either
    // is newer than what there was when this scrape came.
    const std::uint64_t finished_before = finished_;
    const std::uint64_t succeeded_before = succeeded_;
    requested_ = true;
    work_.notify_one();
    ++waiting_;
    done_.wait_until(lock, deadline, [&] { return finished_ > finished_before || stopping_; });
    --waiting_;
    fresh = succeeded_ > succeeded_before;
  }
  if (!latest_) return std::nullopt;
  CollectionResult result = *latest_;
  result.stale = !fresh;
  return result;
}

void SharedCollection::prime() {
  std::lock_guard lock(mutex_);
  requested_ = true;
  work_.notify_one();
}

bool SharedCollection::stop(Clock::duration grace) {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  work_.notify_all();
  done_.notify_all();
  if (!thread_.joinable()) return true;
  const bool finished = done_.wait_for(lock, grace, [&] { return !running_; });
  lock.unlock();
  if (finished) {
    thread_.join();
    return true;
  }
  thread_.detach();
  return false;
}

std::uint64_t SharedCollection::collections() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

std::size_t SharedCollection::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_;
}

void SharedCollection::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return requested_ || stopping_; });
    if (stopping_) return;
    running_ = true;
    lock.unlock();
    const auto started = Clock::now();
    std::shared_ptr<const std::string> text;
    std::string failure;
    try {
      text = std::make_shared<const std::string>(render_text_format(collector_.collect()));
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "unknown error";
    }
    const auto ended = Clock::now();
    if (!failure.empty() && on_failure_) on_failure_("the collection failed: " + failure);
    lock.lock();
    running_ = false;
    // Whoever asked while it ran is answered by it: no second collection for them.
    requested_ = false;
    ++finished_;
    if (text) {
      ++succeeded_;
      CollectionResult result;
      result.text = std::move(text);
      result.duration_seconds = std::chrono::duration<double>(ended - started).count();
      result.finished_unix =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
      latest_ = std::move(result);
      latest_at_ = ended;
    }
    done_.notify_all();
  }
}

}  // namespace gpureap
