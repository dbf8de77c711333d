// The cluster as Prometheus sees it through gpureap's exporters (docs/metrics.md): per host
// (Prometheus's `instance`) and GPU, memory, what no process explains, orphaned holders, the
// biggest holders and the last Xid. Every string is a label value from the server: raw bytes,
// sanitised where they are shown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpureap {

// From gpureap_process_gpu_memory_bytes (the exporter's opt-in --per-process series).
struct FleetProcess {
  std::string pid, user, container, command;
  std::uint64_t bytes = 0;
};

struct FleetUser {
  std::string user;
  std::uint64_t bytes = 0;
};

struct FleetContainer {
  std::string runtime, container, pod_uid;
  std::uint64_t bytes = 0;
};

struct FleetXid {
  std::string xid;       // the label as sent ("79")
  double timestamp = 0;  // Unix seconds of the newest such event
};

struct FleetGpu {
  std::string index;  // the `gpu` label ("0")
  std::string uuid, name;
  std::optional<std::uint64_t> total_bytes, used_bytes, reserved_bytes, unattributed_bytes;
  std::optional<std::uint64_t> orphaned_holders, orphaned_memory_bytes;
  bool lost = false;
  bool lost_unknown = false;  // gpureap_gpu_lost was not 0 or 1 (NaN, say): a warning says so
  // Biggest first, at most the number asked for.
  std::vector<FleetProcess> top_processes;
  std::vector<FleetUser> top_users;
  std::vector<FleetContainer> top_containers;
  std::optional<FleetXid> last_xid;
};

// Whether Prometheus can scrape the host now (`up`), for hosts that exported gpureap series
// within the last hour; Unknown when the host's `up` is not in the answer.
enum class ScrapeState { Up, Down, Unknown };

struct FleetHost {
  std::string instance;
  ScrapeState scrape = ScrapeState::Unknown;
  std::optional<bool> driver_up;       // gpureap_driver_up: the host's NVML loaded
  std::optional<FleetXid> host_xid;    // an Xid event the exporter could not tie to a GPU
  std::vector<FleetGpu> gpus;          // by index, numerically
};

struct FleetView {
  double evaluated_at = 0;  // the server's time of the queries (Unix seconds)
  std::vector<FleetHost> hosts;  // by instance
  std::vector<std::string> warnings;  // the API's warnings, and series that were not understood
};

}  // namespace gpureap
