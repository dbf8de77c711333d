#include "metrics/xid_tracker.hpp"

#include <algorithm>
#include <chrono>

#include "doctor/doctor.hpp"
#include "doctor/event_age.hpp"

namespace gpureap {
namespace {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

XidTracker::XidTracker(XidTrackerOptions options)
    : options_(std::move(options)),
      follower_(options_.kernel_log_file.empty() ? KernelLogFollower::Kind::Kmsg : KernelLogFollower::Kind::SavedFile,
                options_.kernel_log_file.empty() ? options_.kmsg_path : options_.kernel_log_file) {}

bool XidTracker::update(const Snapshot& snapshot) {
  const KernelLogRead read = follower_.read_new();
  last_error_ = read.error.value_or("");
  const double now = unix_now();
  // /dev/kmsg dates records in seconds since boot; a saved log only with an absolute time
  // and zone. Otherwise the event is dated when it was read.
  // (/proc/uptime is read only when there is something to date: watch updates every look.)
  const auto uptime = options_.kernel_log_file.empty() && !read.events.empty()
                          ? uptime_seconds(options_.proc_root.c_str())
                          : std::nullopt;
  for (const XidEvent& event : read.events) {
    double when = now;
    if (uptime && event.seconds_since_boot) {
      when = now - *uptime + *event.seconds_since_boot;
    } else if (const auto stamped = parse_iso8601(event.time_text)) {
      when = *stamped;
    }
    const auto gpu = gpu_at_pci(snapshot, event.pci);
    std::pair<std::string, unsigned> key{gpu ? std::to_string(*gpu) : pci_text(event.pci), event.xid};
    auto it = series_.find(key);
    if (it == series_.end()) {
      if (series_.size() >= kMaxSeries) continue;
      it = series_.emplace(std::move(key), Series{}).first;
    }
    ++it->second.events;
    it->second.last_timestamp = std::max(it->second.last_timestamp, when);
  }
  return !read.error;
}

std::string xid_problem(const XidTracker& tracker) {
  return tracker.last_error().empty() ? "" : "Xid events not counted: " + tracker.last_error();
}

void XidTracker::add_metrics(MetricSet& metrics) const {
  auto& events = metrics.family("gpureap_xid_events_total", MetricType::Counter,
                                "Xid events in the kernel log since the exporter started (the log's history counted once).");
  auto& last = metrics.family("gpureap_xid_last_event_timestamp_seconds", MetricType::Gauge,
                              "Unix time of the newest Xid event of this kind on this GPU.");
  for (const auto& [key, series] : series_) {
    std::vector<MetricLabel> labels{{"gpu", key.first}, {"xid", std::to_string(key.second)}};
    events.add(labels, static_cast<double>(series.events));
    last.add(std::move(labels), series.last_timestamp);
  }
}

}  // namespace gpureap
