// Delivers events on a thread of its own, so that a slow webhook or a hung command never delays
// the daemon's looks or actions: send() queues and returns. Each event goes to every channel the
// policy configures (the command, the webhook), each delivery is logged and counted by channel
// and outcome; a full queue drops the event (counted "dropped"). On stop, what is queued is
// still delivered within a budget, the rest dropped: a webhook call still running when the
// budget ends is cut off (its connection shut), so a server cannot hold the daemon's exit.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "watch/event_log.hpp"
#include "watch/policy.hpp"
#include "watch/watch_counters.hpp"
#include "watch/watch_event.hpp"

namespace gpureap {

class Notifier {
 public:
  static constexpr std::size_t kMaxQueued = 256;

  Notifier(const EventLog& log, CounterBoard& counters);
  ~Notifier();  // stop(0) if not stopped
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // The channels from a (re)loaded policy; events already queued use the new ones.
  void configure(const NotifySettings& settings);
  void send(WatchEvent event);
  // Delivers what is queued for at most `budget`, then drops the rest and ends the thread.
  void stop(std::chrono::milliseconds budget);

 private:
  void run();
  void deliver(const WatchEvent& event, const NotifySettings& settings);

  const EventLog& log_;
  CounterBoard& counters_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<WatchEvent> queue_;
  NotifySettings settings_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point stop_deadline_{};
  // stop_deadline_ for the delivery thread's cancel check, which must not take mutex_.
  std::atomic<std::chrono::steady_clock::rep> cut_off_at_{std::chrono::steady_clock::time_point::max().time_since_epoch().count()};
  std::thread thread_;
};

}  // namespace gpureap
