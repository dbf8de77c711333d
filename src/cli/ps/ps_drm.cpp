#include "cli/ps/ps_drm.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "text/human_format.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
namespace {

using Json = nlohmann::ordered_json;

template <typename T>
Json drm_optional_json(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

// The DRM descriptors of `device` that no client read explains: display-only holders, clients
// whose fdinfo could not be read.
struct DrmNodeHolder {
  pid_t pid;
  const DeviceFileHandle* file;
};
std::vector<DrmNodeHolder> holders_without_client(const Snapshot& snapshot, const drm::DrmDevice& device) {
  std::vector<DrmNodeHolder> out;
  for (const auto& [pid_key, process] : snapshot.table.processes()) {
    const pid_t pid = pid_key;  // a lambda may not capture a structured binding (clang 14)
    for (const auto& file : process.drm_files) {
      if (file.kind == DeviceFileKind::Kfd || file.minor < 0 || !device.has_minor(static_cast<unsigned>(file.minor))) continue;
      const bool in_a_client = std::any_of(snapshot.drm.clients.clients().begin(), snapshot.drm.clients.clients().end(),
                                           [&](const drm::DrmClient& c) {
                                             return std::find(c.holders.begin(), c.holders.end(),
                                                              drm::ClientHolder{pid, file.fd}) != c.holders.end();
                                           });
      if (!in_a_client) out.push_back({pid, &file});
    }
  }
  std::sort(out.begin(), out.end(), [](const DrmNodeHolder& a, const DrmNodeHolder& b) {
    return a.pid != b.pid ? a.pid < b.pid : a.file->fd < b.file->fd;
  });
  return out;
}

std::string drm_holder_command(const Snapshot& snapshot, pid_t pid) {
  const ProcessInfo* p = snapshot.table.find(pid);
  return p != nullptr ? p->command() : std::string("(gone)");
}

std::string drm_holder_user(const Snapshot& snapshot, pid_t pid) {
  const ProcessInfo* p = snapshot.table.find(pid);
  return p != nullptr ? p->user : std::string("-");
}

// KFD names a context by its leader's PID in the initial PID namespace, and keeps it while any
// descriptor of its /dev/kfd file is left (a forked worker's), after the leader is gone and its
// PID free for reuse. The process at that PID is shown only when it holds /dev/kfd itself; in a
// child PID namespace the number is not this namespace's.
const ProcessInfo* kfd_owner(const Snapshot& snapshot, pid_t pid) {
  return snapshot.owns_kfd_context(pid) ? snapshot.table.find(pid) : nullptr;
}

// The process at a KFD directory's PID whose descriptors could not be read (another user's, when
// not root): whether it holds /dev/kfd, and so owns the context, is unknown.
const ProcessInfo* kfd_unreadable(const Snapshot& snapshot, pid_t pid) {
  if (snapshot.in_child_pid_namespace) return nullptr;
  const ProcessInfo* p = snapshot.table.find(pid);
  return p != nullptr && p->fd_access == FdAccess::Denied ? p : nullptr;
}

std::string kfd_user(const Snapshot& snapshot, pid_t pid) {
  if (const ProcessInfo* p = kfd_owner(snapshot, pid)) return p->user;
  if (const ProcessInfo* p = kfd_unreadable(snapshot, pid); p != nullptr && p->details_loaded) return p->user;
  return "-";
}

std::string kfd_command(const Snapshot& snapshot, pid_t pid) {
  if (const ProcessInfo* p = kfd_owner(snapshot, pid)) return p->command();
  if (kfd_unreadable(snapshot, pid) != nullptr) {
    return "(not readable without root: whether this PID holds /dev/kfd cannot be checked)";
  }
  if (snapshot.in_child_pid_namespace) return "(a PID of the host's namespace)";
  const auto holders = snapshot.kfd_context_holders(pid);
  if (holders.empty()) return "(the PID holds no /dev/kfd: its context is kept by another descriptor)";
  std::string list;
  for (const pid_t h : holders) list += fmt::format("{}{}", list.empty() ? "" : ", ", h);
  return "(exited: its context is kept by PID " + list + ", holding its /dev/kfd and render client)";
}

// Whether the filter's --pid/--user/--container select the KFD context listed under `pid`: by its
// own process, by the processes keeping it after that one exited, or by a process whose
// descriptors are unreadable.
bool kfd_selected(const Snapshot& snapshot, const PsFilter& filter, pid_t pid) {
  if (!filter.linux_filter()) return true;
  if (const ProcessInfo* p = kfd_owner(snapshot, pid)) return filter.linux_selected(pid, p);
  if (const ProcessInfo* p = kfd_unreadable(snapshot, pid)) return filter.linux_selected(pid, p);
  const auto holders = snapshot.kfd_context_holders(pid);
  return std::any_of(holders.begin(), holders.end(),
                     [&](pid_t h) { return filter.linux_selected(h, snapshot.table.find(h)); });
}

bool pid_selected(const Snapshot& snapshot, const PsFilter& filter, pid_t pid) {
  return !filter.linux_filter() || filter.linux_selected(pid, snapshot.table.find(pid));
}

}  // namespace

std::string render_drm_gpus(const Snapshot& snapshot, const PsFilter& filter, const TerminalStyle& style,
                            const OutputWidth& width) {
  const auto& reading = snapshot.drm;
  std::string out;
  for (const auto& device : reading.devices) {
    if (!filter.drm_gpu_selected(device.pci_address)) continue;
    std::string title = fmt::format("{} GPU {}  {}  (DRM fdinfo)", drm::gpu_vendor_name(device.vendor), device.pci_address,
                                    sanitize_for_terminal(device.driver));
    if (device.vram_used || device.vram_total) {
      title += fmt::format("  VRAM {} used of {}", format_bytes(device.vram_used), format_bytes(device.vram_total));
    }
    if (device.xgmi_hive_id) title += fmt::format("  XGMI hive {}", *device.xgmi_hive_id);
    out += "\n" + style.bold(title) + "\n";
    const std::size_t rows_start = out.size();
    const auto clients = reading.clients.clients_of(device.pci_address);
    bool header = false;
    for (const auto* client : clients) {
      std::vector<pid_t> pids;
      for (const pid_t pid : client->pids()) {
        if (pid_selected(snapshot, filter, pid)) pids.push_back(pid);
      }
      if (pids.empty()) continue;
      if (!std::exchange(header, true)) out += style.dim("      PID USER          VRAM     SHARED  CLIENT  COMMAND") + "\n";
      const std::string start =
          fmt::format("  {:>7} {} {:>10} {:>10}  {:<6}  ", pids.front(), fixed_cell(drm_holder_user(snapshot, pids.front()), 9),
                      format_bytes(drm::device_memory_bytes(client->stats)),
                      format_bytes(drm::shared_device_bytes(client->stats)), client->client_id);
      out += start + width.rest_of_line(drm_holder_command(snapshot, pids.front()), start) + "\n";
      for (std::size_t i = 1; i < pids.size(); ++i) {
        const std::string also = fmt::format("  {:>7} {} {:>10} {:>10}  {:<6}  ", pids[i],
                                             fixed_cell(drm_holder_user(snapshot, pids[i]), 9), "(same)", "", client->client_id);
        out += also + width.rest_of_line(drm_holder_command(snapshot, pids[i]), also) + "\n";
      }
    }
    for (const auto& holder : holders_without_client(snapshot, device)) {
      if (!pid_selected(snapshot, filter, holder.pid)) continue;
      const bool display = holder.file->kind == DeviceFileKind::DrmCard;
      const std::string start = fmt::format("  {:>7} {} {:>10} {:>10}  {:<6}  ", holder.pid,
                                            fixed_cell(drm_holder_user(snapshot, holder.pid), 9), "?", "",
                                            display ? "card" : "render");
      out += start + width.rest_of_line(drm_holder_command(snapshot, holder.pid), start) + "\n";
    }
    for (const auto& process : reading.kfd_processes) {
      const auto vram = drm::kfd_vram_on(reading, process, device.pci_address);
      if (!vram || !kfd_selected(snapshot, filter, process.pid)) continue;
      const std::string start = fmt::format("  {:>7} {} {:>10} {:>10}  {:<6}  ", process.pid,
                                            fixed_cell(kfd_user(snapshot, process.pid), 9), format_bytes(*vram), "", "kfd");
      out += start + width.rest_of_line(kfd_command(snapshot, process.pid), start) + "\n";
    }
    if (out.size() == rows_start) {
      out += style.dim(filter.linux_filter() ? "  no process of the selection holds this GPU" : "  no process holds this GPU") + "\n";
    }
  }
  if (reading.fdinfo_unread > 0) {
    out += style.dim(fmt::format("  {} DRM descriptor(s) without readable client stats: memory unknown (run as root; "
                                 "amdgpu before Linux 5.14 prints none)",
                                 reading.fdinfo_unread)) +
           "\n";
  }
  return out;
}

namespace {

// One client: who holds it, its memory by region and its engines' use.
Json client_json(const drm::DrmClient& client) {
  Json c;
  c["client_id"] = client.client_id;
  c["pids"] = client.pids();
  Json descriptors = Json::array();
  for (const auto& h : client.holders) descriptors.push_back(Json{{"pid", h.pid}, {"fd", h.fd}});
  c["descriptors"] = std::move(descriptors);
  c["vram_bytes"] = drm_optional_json(drm::device_memory_bytes(client.stats));
  c["shared_vram_bytes"] = drm_optional_json(drm::shared_device_bytes(client.stats));
  Json regions = Json::array();
  for (const auto& r : client.stats.regions) {
    regions.push_back(Json{{"region", r.region},
                           {"total_bytes", drm_optional_json(r.total)},
                           {"shared_bytes", drm_optional_json(r.shared)},
                           {"resident_bytes", drm_optional_json(r.resident)},
                           {"purgeable_bytes", drm_optional_json(r.purgeable)},
                           {"active_bytes", drm_optional_json(r.active)}});
  }
  c["regions"] = std::move(regions);
  Json engines = Json::array();
  for (const auto& e : client.stats.engines) {
    engines.push_back(Json{{"engine", e.engine},
                           {"busy_ns", drm_optional_json(e.busy_ns)},
                           {"capacity", e.capacity},
                           {"cycles", drm_optional_json(e.cycles)},
                           {"total_cycles", drm_optional_json(e.total_cycles)}});
  }
  c["engines"] = std::move(engines);
  return c;
}

// The device's clients that a selected process holds.
Json clients_json(const Snapshot& snapshot, const PsFilter& filter, const drm::DrmDevice& device) {
  Json clients = Json::array();
  for (const auto* client : snapshot.drm.clients.clients_of(device.pci_address)) {
    const auto holders = client->pids();
    if (std::none_of(holders.begin(), holders.end(), [&](pid_t pid) { return pid_selected(snapshot, filter, pid); })) continue;
    clients.push_back(client_json(*client));
  }
  return clients;
}

// Selected holders of the device's nodes whose descriptors show no client stats.
Json holders_without_stats_json(const Snapshot& snapshot, const PsFilter& filter, const drm::DrmDevice& device) {
  Json others = Json::array();
  for (const auto& holder : holders_without_client(snapshot, device)) {
    if (!pid_selected(snapshot, filter, holder.pid)) continue;
    others.push_back(Json{{"pid", holder.pid},
                          {"fd", holder.file->fd},
                          {"node", holder.file->kind == DeviceFileKind::DrmCard ? "card" : "render"},
                          {"minor", holder.file->minor}});
  }
  return others;
}

// Selected KFD contexts with VRAM on the device, with whose they are as far as can be told.
Json kfd_processes_json(const Snapshot& snapshot, const PsFilter& filter, const drm::DrmDevice& device) {
  const auto& reading = snapshot.drm;
  Json kfd = Json::array();
  for (const auto& process : reading.kfd_processes) {
    const auto vram = drm::kfd_vram_on(reading, process, device.pci_address);
    if (!vram || !kfd_selected(snapshot, filter, process.pid)) continue;
    const ProcessInfo* owner = kfd_owner(snapshot, process.pid);
    const ProcessInfo* unreadable = kfd_unreadable(snapshot, process.pid);
    const ProcessInfo* shown = owner != nullptr ? owner : unreadable;
    kfd.push_back(Json{{"pid", process.pid},
                       {"pasid", drm_optional_json(process.pasid)},
                       {"vram_bytes", *vram},
                       {"owner", owner != nullptr        ? "self"
                                 : unreadable != nullptr ? "unreadable"
                                 : snapshot.in_child_pid_namespace ? "host-pid"
                                                                   : "other"},
                       {"user", shown != nullptr && shown->details_loaded ? Json(shown->user) : Json(nullptr)},
                       {"held_by", snapshot.kfd_context_holders(process.pid)}});
  }
  return kfd;
}

}  // namespace

Json drm_gpus_json(const Snapshot& snapshot, const PsFilter& filter) {
  const auto& reading = snapshot.drm;
  Json gpus = Json::array();
  for (const auto& device : reading.devices) {
    if (!filter.drm_gpu_selected(device.pci_address)) continue;
    Json gpu;
    gpu["vendor"] = drm::gpu_vendor_name(device.vendor);
    gpu["source"] = "drm";
    gpu["pci_bus_id"] = device.pci_address;
    gpu["driver"] = device.driver;
    // 64-bit identifiers as decimal strings: JSON readers that hold numbers as doubles (jq,
    // JavaScript) would round them, and two GPUs of different hives could compare equal.
    gpu["xgmi_hive_id"] = device.xgmi_hive_id ? Json(std::to_string(*device.xgmi_hive_id)) : Json(nullptr);
    gpu["xgmi_device_id"] = device.xgmi_device_id ? Json(std::to_string(*device.xgmi_device_id)) : Json(nullptr);
    Json nodes = Json::array();
    for (const auto& node : device.nodes) {
      nodes.push_back(Json{{"name", node.name}, {"kind", node.kind == drm::NodeKind::Card ? "card" : "render"},
                           {"minor", node.minor}});
    }
    gpu["nodes"] = std::move(nodes);
    gpu["memory"] = Json{{"total_bytes", drm_optional_json(device.vram_total)},
                         {"used_bytes", drm_optional_json(device.vram_used)},
                         {"clients_bytes", drm_optional_json(reading.clients.device_memory_of(device.pci_address))}};
    gpu["clients"] = clients_json(snapshot, filter, device);
    gpu["holders_without_stats"] = holders_without_stats_json(snapshot, filter, device);
    gpu["kfd_processes"] = kfd_processes_json(snapshot, filter, device);
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

}  // namespace gpureap
