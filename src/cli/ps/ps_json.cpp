#include "cli/ps/ps_json.hpp"

#include <ctime>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "cli/common/json_value.hpp"
#include "cli/ps/ps_drm.hpp"
#include "text/human_format.hpp"

namespace gpureap {
namespace {

using Json = nlohmann::ordered_json;

std::string iso8601(std::chrono::system_clock::time_point at) {
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(at)),
                     millis);
}

Json error_json(const std::optional<NvmlError>& error) {
  if (!error) return nullptr;
  return Json{{"code", error->code}, {"name", error->name()}, {"call", error->call}, {"message", error->message}};
}

Json container_json(const ProcessInfo* process) {
  if (process == nullptr || !process->container) return nullptr;
  const auto& c = *process->container;
  Json out{{"runtime", c.runtime}, {"id", c.id}};
  out["pod_uid"] = c.pod_uid.empty() ? Json(nullptr) : Json(c.pod_uid);
  out["rootless_uid"] = c.rootless_uid ? Json(*c.rootless_uid) : Json(nullptr);
  return out;
}

Json namespace_pid(const ProcessInfo* process) {
  if (process == nullptr || process->ns_pids.empty()) return nullptr;
  return process->ns_pids.back();
}

std::string state_text(char state) { return std::string(1, state); }

Json memory_json(const MemoryReading& m) {
  return Json{{"total_bytes", optional_value(m.total)},
              {"used_bytes", optional_value(m.used)},
              {"reserved_bytes", optional_value(m.reserved)},
              {"free_bytes", optional_value(m.free)},
              {"source", m.source.empty() ? Json(nullptr) : Json(m.source)}};
}

Json gpu_json(const GpuView& gpu) {
  const auto& r = gpu.reading;
  Json out;
  out["index"] = r.index;
  out["vendor"] = "nvidia";
  out["source"] = "nvml";
  out["uuid"] = r.uuid;
  out["name"] = r.name;
  out["pci_bus_id"] = r.pci_bus_id;
  out["minor_number"] = optional_value(r.minor_number);
  out["error"] = error_json(r.error);
  out["temperature_c"] = optional_value(r.temperature_c);
  out["power_watts"] = r.power_mw ? Json(static_cast<double>(*r.power_mw) / 1000.0) : Json(nullptr);
  out["utilization"] = Json{{"gpu_percent", optional_value(r.util_gpu_percent)},
                            {"memory_percent", optional_value(r.util_memory_percent)}};
  out["persistence_mode"] = optional_value(r.persistence_mode);
  Json memory = memory_json(r.memory);
  memory["attributed_bytes"] = gpu.memory.attributed;
  memory["unattributed_bytes"] = optional_value(gpu.memory.unattributed);
  memory["held_for_exited_bytes"] = gpu.memory.held_for_exited;
  out["memory"] = std::move(memory);
  Json mig_devices = Json::array();
  for (const auto& mig : r.mig_devices) {
    mig_devices.push_back(Json{{"gpu_instance_id", mig.gpu_instance_id},
                               {"compute_instance_id", mig.compute_instance_id},
                               {"uuid", mig.uuid},
                               {"name", mig.name},
                               {"memory", memory_json(mig.memory)}});
  }
  out["mig"] = Json{{"enabled", r.mig_enabled}, {"devices", std::move(mig_devices)}};
  out["processes_complete"] = r.processes_complete;
  out["warnings"] = r.warnings;
  return out;
}

Json process_json(const GpuProcessView& view) {
  const ProcessInfo* p = view.linux_process;
  const auto& d = view.driver;
  Json out;
  out["gpu"] = view.gpu_index;
  out["pid"] = d.pid;
  out["type"] = d.types.label();
  out["gpu_memory_bytes"] = optional_value(d.used_memory);
  out["gpu_instance_id"] = optional_value(d.gpu_instance_id);
  out["compute_instance_id"] = optional_value(d.compute_instance_id);
  out["sm_util_percent"] = optional_value(d.sm_util_percent);
  out["mem_util_percent"] = optional_value(d.mem_util_percent);
  out["identity"] = identity_name(view.identity);
  out["identity_reason"] = view.identity_reason.empty() ? Json(nullptr) : Json(view.identity_reason);
  out["held_by"] = view.held_by;
  out["holders_here"] = view.holders_here;
  if (view.mps_role == MpsRole::None) {
    out["mps"] = nullptr;
  } else {
    Json mps;
    mps["role"] = mps_role_name(view.mps_role);
    mps["server_pid"] = optional_value(view.mps_server);
    mps["control_daemon_pid"] = optional_value(view.mps_control_daemon);
    mps["clients"] = view.mps_role == MpsRole::Server ? Json(view.mps_clients) : Json(nullptr);
    out["mps"] = std::move(mps);
  }
  out["user"] = p ? Json(p->user) : Json(nullptr);
  out["uid"] = p ? Json(p->uid) : Json(nullptr);
  out["state"] = p ? Json(state_text(p->state)) : Json(nullptr);
  out["wchan"] = p && !p->wchan.empty() ? Json(p->wchan) : Json(nullptr);
  out["ppid"] = p ? Json(p->ppid) : Json(nullptr);
  out["pgid"] = p ? Json(p->pgid) : Json(nullptr);
  out["session"] = p ? Json(p->session) : Json(nullptr);
  out["command"] = p ? Json(p->command()) : Json(nullptr);
  out["exe"] = p && !p->exe.empty() ? Json(p->exe) : Json(nullptr);
  out["namespace_pid"] = namespace_pid(p);
  out["ns_pids"] = p ? Json(p->ns_pids) : Json(nullptr);
  out["container"] = container_json(p);
  out["start_time_unix"] = p ? Json(p->start_time_unix) : Json(nullptr);
  out["elapsed_seconds"] = p ? Json(p->elapsed_seconds) : Json(nullptr);
  out["cpu_seconds"] = p ? Json(p->cpu_seconds) : Json(nullptr);
  out["cpu_percent"] = p ? Json(p->cpu_percent) : Json(nullptr);
  out["rss_bytes"] = p ? Json(p->rss_bytes) : Json(nullptr);
  return out;
}

Json holder_json(const HolderView& holder, const Snapshot& snapshot) {
  const ProcessInfo& p = *holder.linux_process;
  Json out;
  out["pid"] = holder.pid;
  out["gpus"] = holder.gpus;
  Json files = Json::array();
  for (const auto& f : p.device_files) files.push_back(f.path);
  out["device_files"] = std::move(files);
  out["listed_by_driver"] = holder.listed_by_driver;
  out["role"] = std::string(holder_role_name(holder.role));
  out["orphan_evidence"] = holder.role == HolderRole::Orphan
                               ? Json{{"kind", std::string(orphan_evidence_name(holder.orphan_evidence))},
                                      {"pids", holder.evidence_pids}}
                               : Json(nullptr);
  out["listed_ancestor"] = optional_value(holder.listed_ancestor);
  out["context_of"] = optional_value(holder.context_of);
  out["ppid"] = p.ppid;
  out["pgid"] = p.pgid;
  out["user"] = p.user;
  out["uid"] = p.uid;
  out["state"] = state_text(p.state);
  out["command"] = p.command();
  out["namespace_pid"] = namespace_pid(&p);
  out["container"] = container_json(&p);
  out["elapsed_seconds"] = p.elapsed_seconds;
  Json ancestry = Json::array();
  for (pid_t pid : holder.ancestry) {
    const ProcessInfo* a = snapshot.table.find(pid);
    ancestry.push_back(Json{{"pid", pid}, {"command", a ? Json(a->command()) : Json(nullptr)}});
  }
  out["ancestry"] = std::move(ancestry);
  return out;
}

}  // namespace

nlohmann::ordered_json ps_to_json(const Snapshot& snapshot, const PsFilter& filter) {
  Json out;
  out["schema"] = kPsSchema;
  out["generated_at"] = iso8601(snapshot.taken_at);
  const auto& d = snapshot.driver;
  Json driver;
  driver["loaded"] = d.loaded;
  driver["library"] = d.library_path.empty() ? Json(nullptr) : Json(d.library_path);
  driver["driver_version"] = d.driver_version.empty() ? Json(nullptr) : Json(d.driver_version);
  driver["nvml_version"] = d.nvml_version.empty() ? Json(nullptr) : Json(d.nvml_version);
  driver["cuda_driver_version"] =
      d.cuda_driver_version ? Json(format_cuda_version(*d.cuda_driver_version)) : Json(nullptr);
  if (!d.loaded) {
    driver["error"] = Json{{"code", d.nvml_code != 0 ? Json(d.nvml_code) : Json(nullptr)},
                           {"kind", d.failure == LoadFailure::LibraryNotFound ? "library_not_found"
                                    : d.failure == LoadFailure::MissingSymbols ? "missing_symbols"
                                                                               : "init_failed"},
                           {"message", d.message}};
  } else {
    driver["error"] = error_json(d.count_error);
  }
  out["driver"] = std::move(driver);
  out["host"] = Json{{"in_child_pid_namespace", snapshot.in_child_pid_namespace},
                     {"dev_dir", snapshot.table.options().dev_dir},
                     {"processes_not_inspected", snapshot.processes_not_inspected}};

  Json gpus = Json::array();
  for (const auto& gpu : snapshot.gpus) {
    if (filter.gpu_selected(gpu.reading.index)) gpus.push_back(gpu_json(gpu));
  }
  out["gpus"] = std::move(gpus);
  out["drm_gpus"] = drm_gpus_json(snapshot, filter);
  Json processes = Json::array();
  for (const auto& process : snapshot.processes) {
    if (filter.process_selected(process)) processes.push_back(process_json(process));
  }
  out["processes"] = std::move(processes);
  Json holders = Json::array();
  for (const auto& holder : snapshot.holders) {
    if (filter.holder_selected(holder)) holders.push_back(holder_json(holder, snapshot));
  }
  out["holders"] = std::move(holders);
  return out;
}

}  // namespace gpureap
