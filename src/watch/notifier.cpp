#include "watch/notifier.hpp"

#include <fmt/format.h>

#include "watch/notify_channels.hpp"

namespace gpureap {
namespace {

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace

Notifier::Notifier(const EventLog& log, CounterBoard& counters) : log_(log), counters_(counters) {
  thread_ = std::thread([this] { run(); });
}

Notifier::~Notifier() { stop(std::chrono::milliseconds(0)); }

void Notifier::configure(const NotifySettings& settings) {
  {
    const std::lock_guard lock(mutex_);
    settings_ = settings;
  }
  for (const char* outcome : {"sent", "failed"}) {
    if (!settings.command.empty()) counters_.declare(&WatchCounters::notifications, {"command", outcome});
    if (!settings.webhook.empty()) counters_.declare(&WatchCounters::notifications, {"webhook", outcome});
  }
}

void Notifier::send(WatchEvent event) {
  std::vector<const char*> channels;
  std::string why;
  {
    const std::lock_guard lock(mutex_);
    if (!settings_.command.empty()) channels.push_back("command");
    if (!settings_.webhook.empty()) channels.push_back("webhook");
    if (channels.empty()) return;
    if (!stopping_ && queue_.size() < kMaxQueued) {
      queue_.push_back(std::move(event));
      wake_.notify_one();
      return;
    }
    why = stopping_ ? "gpureap watch is stopping" : "the queue is full";
  }
  for (const char* channel : channels) counters_.add(&WatchCounters::notifications, {channel, "dropped"});
  log_.write(LogPriority::Warning, "notification-dropped",
             {{"rule", event.rule}, {"pid", std::to_string(event.process.pid)}, {"why", why}});
}

void Notifier::stop(std::chrono::milliseconds budget) {
  {
    const std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    stopping_ = true;
    stop_deadline_ = std::chrono::steady_clock::now() + budget;
    cut_off_at_.store(stop_deadline_.time_since_epoch().count());
  }
  wake_.notify_one();
  thread_.join();
}

void Notifier::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    if (stopping_ && std::chrono::steady_clock::now() >= stop_deadline_) {
      log_.write(LogPriority::Warning, "notification-dropped",
                 {{"count", std::to_string(queue_.size())}, {"why", "gpureap watch is stopping"}});
      queue_.clear();
      return;
    }
    WatchEvent event = std::move(queue_.front());
    queue_.pop_front();
    const NotifySettings settings = settings_;
    lock.unlock();
    deliver(event, settings);
    lock.lock();
  }
}

void Notifier::deliver(const WatchEvent& event, const NotifySettings& settings) {
  const std::string json = watch_event_json(event);
  const auto record = [&](std::string_view channel, const Delivery& delivery) {
    counters_.add(&WatchCounters::notifications, {std::string(channel), std::string(delivery_outcome_name(delivery.outcome))});
    const LogPriority priority = delivery.outcome == DeliveryOutcome::Sent ? LogPriority::Info : LogPriority::Warning;
    log_.write(priority, "notification",
               {{"channel", std::string(channel)},
                {"outcome", std::string(delivery_outcome_name(delivery.outcome))},
                {"rule", event.rule},
                {"pid", std::to_string(event.process.pid)},
                {"event_kind", std::string(watch_event_kind_name(event.kind))},
                {"detail", delivery.detail}});
  };
  if (!settings.command.empty()) {
    std::vector<std::string> argv = settings.command;
    for (auto& arg : watch_event_arguments(event)) argv.push_back(std::move(arg));
    record("command", run_notify_command(argv, json, millis(settings.command_timeout_seconds)));
  }
  if (!settings.webhook.empty()) {
    const auto cut_off = [this] {
      return std::chrono::steady_clock::now().time_since_epoch().count() >= cut_off_at_.load();
    };
    Delivery delivery =
        post_webhook(settings.webhook, settings.webhook_ca_file, json, millis(settings.webhook_timeout_seconds), cut_off);
    if (delivery.outcome != DeliveryOutcome::Sent && cut_off()) {
      delivery = {DeliveryOutcome::Failed, "cut off: gpureap watch is stopping"};
    }
    record("webhook", delivery);
  }
}

}  // namespace gpureap
