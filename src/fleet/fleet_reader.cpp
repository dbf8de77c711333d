#include "fleet/fleet_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

constexpr std::size_t kMaxWarnings = 20;

enum class Series {
  Now,
  GpuInfo,
  Total,
  Used,
  Reserved,
  Unattributed,
  OrphanedHolders,
  OrphanedMemory,
  Lost,
  Processes,
  Users,
  Containers,
  LastXid,
  DriverUp,
  ScrapeUp,
};

struct Query {
  Series series;
  std::string promql;
};

std::string per_gpu(std::string_view metric) { return fmt::format("max by (instance, gpu) ({})", metric); }

// The biggest `top` series of each host's GPU, one series per distinct `labels`.
std::string top_per_gpu(int top, std::string_view labels, std::string_view metric) {
  return fmt::format("topk by (instance, gpu) ({}, max by (instance, gpu, {}) ({}))", top, labels, metric);
}

std::vector<Query> queries(int top) {
  return {
      // The server's clock: every other query is evaluated at this one instant.
      {Series::Now, "vector(time())"},
      {Series::GpuInfo, "max by (instance, gpu, uuid, name) (gpureap_gpu_info)"},
      {Series::Total, per_gpu("gpureap_gpu_memory_total_bytes")},
      {Series::Used, per_gpu("gpureap_gpu_memory_used_bytes")},
      {Series::Reserved, per_gpu("gpureap_gpu_memory_reserved_bytes")},
      {Series::Unattributed, per_gpu("gpureap_gpu_memory_unattributed_bytes")},
      {Series::OrphanedHolders, per_gpu("gpureap_gpu_orphaned_holders")},
      {Series::OrphanedMemory, per_gpu("gpureap_gpu_orphaned_memory_bytes")},
      {Series::Lost, per_gpu("gpureap_gpu_lost")},
      {Series::Processes, top_per_gpu(top, "pid, user, container, command", "gpureap_process_gpu_memory_bytes")},
      {Series::Users, top_per_gpu(top, "user", "gpureap_user_gpu_memory_bytes")},
      {Series::Containers, top_per_gpu(top, "runtime, container, pod_uid", "gpureap_container_gpu_memory_bytes")},
      {Series::LastXid, "topk by (instance, gpu) (1, max by (instance, gpu, xid) (gpureap_xid_last_event_timestamp_seconds))"},
      {Series::DriverUp, "max by (instance) (gpureap_driver_up)"},
      // Hosts that exported gpureap series within the hour, and whether they can be scraped now:
      // a host that went down has no current series left to show it by.
      {Series::ScrapeUp, "max by (instance) (up and on (instance, job) last_over_time(gpureap_driver_up[1h]))"},
  };
}

// gpureap's exporter sends its label values sanitised for a terminal: they are read back to the
// bytes they stand for here, and sanitised once where they are shown (a value from any other
// source with no escapes in it is unchanged).
std::string label(const Sample& sample, const std::string& name) {
  const auto it = sample.labels.find(name);
  return it == sample.labels.end() ? std::string() : unsanitize_terminal_text(it->second);
}

// No GPU had an Xid before 2000, and none is stamped a day past the server's own clock.
constexpr double kEarliestPlausibleTime = 946684800;  // 2000-01-01
constexpr double kFutureSlackSeconds = 86400;

// GPU labels sort as numbers when they are ("10" after "9").
bool gpu_before(const std::string& a, const std::string& b) {
  unsigned long long x = 0, y = 0;
  const bool a_number = !a.empty() && std::from_chars(a.data(), a.data() + a.size(), x).ptr == a.data() + a.size();
  const bool b_number = !b.empty() && std::from_chars(b.data(), b.data() + b.size(), y).ptr == b.data() + b.size();
  if (a_number && b_number) return x < y;
  if (a_number != b_number) return a_number;
  return a < b;
}

struct GpuKey {
  std::string instance, gpu;
  bool operator<(const GpuKey& other) const {
    if (instance != other.instance) return instance < other.instance;
    if (gpu != other.gpu) return gpu_before(gpu, other.gpu);
    return false;
  }
};

class Assembly {
 public:
  explicit Assembly(FleetView& view) : view_(view) {}

  void add(Series series, const std::vector<Sample>& samples) {
    for (const Sample& sample : samples) add_one(series, sample);
  }

  void finish() {
    for (auto& [key, gpu] : gpus_) {
      std::sort(gpu.top_processes.begin(), gpu.top_processes.end(), [](const auto& a, const auto& b) {
        return std::tie(b.bytes, a.pid) < std::tie(a.bytes, b.pid);
      });
      std::sort(gpu.top_users.begin(), gpu.top_users.end(),
                [](const auto& a, const auto& b) { return std::tie(b.bytes, a.user) < std::tie(a.bytes, b.user); });
      std::sort(gpu.top_containers.begin(), gpu.top_containers.end(), [](const auto& a, const auto& b) {
        return std::tie(b.bytes, a.container, a.pod_uid) < std::tie(a.bytes, b.container, b.pod_uid);
      });
      host(key.instance).gpus.push_back(std::move(gpu));
    }
    for (auto& [instance, host] : hosts_) view_.hosts.push_back(std::move(host));
  }

 private:
  FleetHost& host(const std::string& instance) {
    auto [it, added] = hosts_.try_emplace(instance);
    if (added) it->second.instance = instance;
    return it->second;
  }

  FleetGpu& gpu(const Sample& sample) {
    GpuKey key{label(sample, "instance"), label(sample, "gpu")};
    host(key.instance);
    auto [it, added] = gpus_.try_emplace(key);
    if (added) it->second.index = key.gpu;
    return it->second;
  }

  void warn(std::string text) {
    if (view_.warnings.size() < kMaxWarnings) view_.warnings.push_back(std::move(text));
  }

  // A byte count or a count: finite, not negative, below 2^64. Anything else is warned about
  // and left unknown: a NaN must not print as 0 bytes.
  std::optional<std::uint64_t> amount(const Sample& sample, std::string_view what) {
    const double v = sample.value;
    if (std::isfinite(v) && v >= 0 && v < 18446744073709551616.0) return static_cast<std::uint64_t>(std::llround(v));
    bad_value(sample, what, "shown as unknown");
    return std::nullopt;
  }

  void bad_value(const Sample& sample, std::string_view what, std::string_view outcome) {
    const std::string gpu_label = label(sample, "gpu");
    warn(fmt::format("bad value from Prometheus: {} of {}{} is {}: {}", what, label(sample, "instance"),
                     gpu_label.empty() ? "" : " GPU " + gpu_label, sample.value, outcome));
  }

  // 0 or 1 (a gauge of a state); nullopt, with a warning, for anything else.
  std::optional<bool> state(const Sample& sample, std::string_view what) {
    if (sample.value == 0 || sample.value == 1) return sample.value == 1;
    bad_value(sample, what, "shown as unknown");
    return std::nullopt;
  }

  bool plausible_time(double t) const {
    if (!std::isfinite(t) || t < kEarliestPlausibleTime) return false;
    return view_.evaluated_at <= 0 || t <= view_.evaluated_at + kFutureSlackSeconds;
  }

  void add_one(Series series, const Sample& sample) {
    switch (series) {
      case Series::Now: return;
      case Series::GpuInfo: {
        FleetGpu& g = gpu(sample);
        g.uuid = label(sample, "uuid");
        g.name = label(sample, "name");
        return;
      }
      case Series::Total: gpu(sample).total_bytes = amount(sample, "total memory"); return;
      case Series::Used: gpu(sample).used_bytes = amount(sample, "used memory"); return;
      case Series::Reserved: gpu(sample).reserved_bytes = amount(sample, "reserved memory"); return;
      case Series::Unattributed: gpu(sample).unattributed_bytes = amount(sample, "unattributed memory"); return;
      case Series::OrphanedHolders: gpu(sample).orphaned_holders = amount(sample, "the orphaned holder count"); return;
      case Series::OrphanedMemory: gpu(sample).orphaned_memory_bytes = amount(sample, "orphaned memory"); return;
      case Series::Lost: {
        const auto lost = state(sample, "gpureap_gpu_lost");
        gpu(sample).lost = lost.value_or(false);
        gpu(sample).lost_unknown = !lost;
        return;
      }
      case Series::Processes: {
        const auto bytes = amount(sample, "a process's memory");
        if (!bytes || *bytes == 0) return;
        gpu(sample).top_processes.push_back(FleetProcess{label(sample, "pid"), label(sample, "user"),
                                                         label(sample, "container"), label(sample, "command"), *bytes});
        return;
      }
      case Series::Users: {
        const auto bytes = amount(sample, "a user's memory");
        if (!bytes || *bytes == 0) return;
        gpu(sample).top_users.push_back(FleetUser{label(sample, "user"), *bytes});
        return;
      }
      case Series::Containers: {
        const auto bytes = amount(sample, "a container's memory");
        if (!bytes || *bytes == 0) return;
        gpu(sample).top_containers.push_back(FleetContainer{label(sample, "runtime"), label(sample, "container"),
                                                            label(sample, "pod_uid"), *bytes});
        return;
      }
      case Series::LastXid: {
        if (!plausible_time(sample.value)) return bad_value(sample, "an Xid time (Unix seconds)", "not shown");
        FleetXid xid{label(sample, "xid"), sample.value};
        if (label(sample, "gpu").empty()) {
          FleetHost& h = host(label(sample, "instance"));
          if (!h.host_xid || h.host_xid->timestamp < xid.timestamp) h.host_xid = xid;
        } else {
          gpu(sample).last_xid = xid;
        }
        return;
      }
      case Series::DriverUp: host(label(sample, "instance")).driver_up = state(sample, "gpureap_driver_up"); return;
      case Series::ScrapeUp: {
        const auto up = state(sample, "up");
        host(label(sample, "instance")).scrape = !up ? ScrapeState::Unknown : *up ? ScrapeState::Up : ScrapeState::Down;
        return;
      }
    }
  }

  FleetView& view_;
  std::map<std::string, FleetHost> hosts_;
  std::map<GpuKey, FleetGpu> gpus_;
};

}  // namespace

std::vector<std::string> fleet_queries(int top) {
  std::vector<std::string> texts;
  for (auto& q : queries(top)) texts.push_back(std::move(q.promql));
  return texts;
}

FleetReadResult read_fleet(const QueryFunction& query, int top) {
  top = std::clamp(top, 1, kMaxTopHolders);
  FleetReadResult result;
  Assembly assembly(result.view);
  std::optional<double> at;
  for (const Query& q : queries(top)) {
    QueryResult answer = query(q.promql, at);
    if (answer.failure) {
      result.failure = std::move(answer.failure);
      result.view = FleetView{};
      return result;
    }
    if (q.series == Series::Now && !answer.samples.empty() && std::isfinite(answer.samples.front().value)) {
      at = answer.samples.front().value;
      result.view.evaluated_at = *at;
    }
    for (auto& warning : answer.warnings) {
      if (result.view.warnings.size() < kMaxWarnings) result.view.warnings.push_back("Prometheus: " + warning);
    }
    assembly.add(q.series, answer.samples);
  }
  assembly.finish();
  return result;
}

}  // namespace gpureap
