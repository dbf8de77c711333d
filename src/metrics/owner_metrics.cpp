// Whose memory it is: per user, per container or pod, and (opt-in) per process
// (docs/metrics.md, "Per user, per container" and "Per process").
#include <map>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "metrics/snapshot_metrics.hpp"

namespace gpureap {
namespace {

// The Linux process a listed PID stands for, when that can be trusted: the process itself
// (identity ok, or unverifiable), or for an exited PID the first holder keeping its context
// alive. A PID that names a stranger here (mismatch) is never anyone's.
const ProcessInfo* owner_of(const Snapshot& snapshot, const GpuProcessView& view) {
  if (view.identity == Identity::Ok || view.identity == Identity::Unverified) return view.linux_process;
  if (view.identity == Identity::Foreign && !view.held_by.empty()) return snapshot.table.find(view.held_by.front());
  return nullptr;
}

struct ProcessKey {
  unsigned gpu;
  unsigned pid;
  auto operator<=>(const ProcessKey&) const = default;
};

struct ProcessRow {
  double bytes = 0;
  std::string user, container, command;
};

}  // namespace

void add_owner_metrics(const Snapshot& snapshot, const SnapshotMetricsOptions& options, MetricSet& metrics) {
  auto& per_user = metrics.family("gpureap_user_gpu_memory_bytes", MetricType::Gauge,
                                  "GPU memory of the user's processes the driver lists.");
  auto& per_container = metrics.family("gpureap_container_gpu_memory_bytes", MetricType::Gauge,
                                       "GPU memory of the container's (or pod's) processes the driver lists.");
  std::map<std::pair<unsigned, std::string>, double> users;
  std::map<std::tuple<unsigned, std::string, std::string, std::string>, double> containers;
  std::map<ProcessKey, ProcessRow> processes;  // a process is listed once per MIG instance: summed
  for (const GpuProcessView& view : snapshot.processes) {
    if (!view.driver.used_memory) continue;
    const auto bytes = static_cast<double>(*view.driver.used_memory);
    const ProcessInfo* owner = owner_of(snapshot, view);
    const std::string user = owner ? outside_label(owner->user) : std::string();
    users[{view.gpu_index, user}] += bytes;
    const ContainerRef* container = owner && owner->container ? &*owner->container : nullptr;
    // A rootless container's id is its user's word (container_selected_by): its series says
    // whose, and never adds to the runtime's container of that id.
    const std::string owner_mark =
        container && container->rootless_uid ? fmt::format("~{}:", *container->rootless_uid) : std::string();
    auto marked = [&](const std::string& id) { return id.empty() ? id : owner_mark + outside_label(id); };
    if (container) {
      containers[{view.gpu_index, container->runtime, marked(container->id), marked(container->pod_uid)}] += bytes;
    }
    if (!options.per_process) continue;
    ProcessRow& row = processes[{view.gpu_index, view.driver.pid}];
    row.bytes += bytes;
    row.user = user;
    row.container = container ? marked(container->id.empty() ? container->pod_uid : container->id) : "";
    // The command of the process itself only: an exited PID's workers run other code.
    row.command = view.linux_process && owner == view.linux_process ? command_label(owner->command()) : "";
  }
  for (const auto& [key, bytes] : users) per_user.add({{"gpu", std::to_string(key.first)}, {"user", key.second}}, bytes);
  for (const auto& [key, bytes] : containers) {
    const auto& [gpu, runtime, id, pod] = key;
    per_container.add({{"gpu", std::to_string(gpu)}, {"runtime", runtime}, {"container", id}, {"pod_uid", pod}}, bytes);
  }
  // MPS: how many servers and clients each GPU has (0 where none, so that a missing series
  // means a missing GPU). A client's memory is in the user, container and process series above.
  auto& mps = metrics.family("gpureap_mps_processes", MetricType::Gauge,
                             "Listed MPS servers and MPS clients on the GPU (role: server, client).");
  for (const auto& gpu : snapshot.gpus) {
    double servers = 0, clients = 0;
    for (const GpuProcessView& view : snapshot.processes) {
      if (view.gpu_index != gpu.reading.index) continue;
      if (view.mps_role == MpsRole::Server) ++servers;
      if (view.mps_role == MpsRole::Client) ++clients;
    }
    mps.add({{"gpu", std::to_string(gpu.reading.index)}, {"role", "server"}}, servers);
    mps.add({{"gpu", std::to_string(gpu.reading.index)}, {"role", "client"}}, clients);
  }
  if (!options.per_process) return;
  auto& per_process = metrics.family("gpureap_process_gpu_memory_bytes", MetricType::Gauge,
                                     "GPU memory of one process the driver lists (opt-in: --per-process).");
  for (const auto& [key, row] : processes) {
    per_process.add({{"gpu", std::to_string(key.gpu)},
                     {"pid", std::to_string(key.pid)},
                     {"user", row.user},
                     {"container", row.container},
                     {"command", row.command}},
                    row.bytes);
  }
}

}  // namespace gpureap
