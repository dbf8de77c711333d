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
                options_.kernel_log_file.empty() ? options_.kmsg_path : options_.kernel_log_file,
                options_.history_bytes) {}

bool XidTracker::update(const Snapshot& snapshot) {
  const double now = unix_now();
  // /dev/kmsg dates records in seconds since boot; a saved log only with an absolute time
  // and zone. Otherwise the event is dated when it was read.
  // (/proc/uptime is read only when there is something to date: watch updates every look.)
  std::optional<std::optional<double>> uptime;
  // Each event is counted as it is read: memory stays the same however many the log holds.
  const XidSink count = [&](XidEvent&& event) {
    double when = now;
    if (options_.kernel_log_file.empty() && event.seconds_since_boot && !uptime) {
      uptime = uptime_seconds(options_.proc_root.c_str());
    }
    if (uptime && *uptime && event.seconds_since_boot) {
      when = now - **uptime + *event.seconds_since_boot;
    } else if (const auto stamped = parse_iso8601(event.time_text)) {
      when = *stamped;
    }
    const auto gpu = gpu_at_pci(snapshot, event.pci);
    std::pair<std::string, unsigned> key{gpu ? std::to_string(*gpu) : pci_text(event.pci), event.xid};
    auto it = series_.find(key);
    if (it == series_.end()) {
      if (series_.size() >= kMaxSeries) return;
      it = series_.emplace(std::move(key), Series{}).first;
    }
    ++it->second.events;
    it->second.last_timestamp = std::max(it->second.last_timestamp, when);
  };
  const KernelLogRead read = follower_.read_new(count);
  if (read.error) {
    last_error_ = *read.error;
  } else if (read.bytes_unread > 0) {
    // Counted on the next updates: the counters lag until then.
    last_error_ = unread_part_text(read) + " yet (a log this long or this fast is counted over the next collections)";
  } else {
    last_error_.clear();
  }
  return last_error_.empty();
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
