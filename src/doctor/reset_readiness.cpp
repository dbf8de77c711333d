#include "doctor/reset_readiness.hpp"

#include <unistd.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace gpureap {

Evidence ResetReadiness::evidence() const {
  EvidenceList list;
  for (const auto& b : blockers) {
    list.push_back(Evidence{{"kind", b.kind}, {"pid", EvidenceValue(b.pid)}, {"text", b.text}});
  }
  return {{"gpu", gpu}, {"ready", ready()}, {"blockers", list}};
}

ResetReadiness check_reset_readiness(const Snapshot& snapshot, unsigned gpu_index) {
  ResetReadiness r;
  r.gpu = gpu_index;
  if (::geteuid() != 0) {
    r.blockers.push_back({"not-root", std::nullopt, "resetting a GPU needs root: run it with sudo"});
  }
  const GpuView* gpu = snapshot.gpu_by_index(gpu_index);
  if (gpu == nullptr || gpu->reading.error) {
    r.blockers.push_back({"gpu-error", std::nullopt, "the driver cannot read this GPU; a reset is unlikely to help"});
    return r;
  }
  std::set<pid_t> named;
  for (const auto& p : snapshot.processes) {
    if (p.gpu_index != gpu_index) continue;
    const auto pid = static_cast<pid_t>(p.driver.pid);
    if (!named.insert(pid).second) continue;
    const std::string command = p.linux_process ? p.linux_process->command() : std::string("not visible here");
    r.blockers.push_back({"gpu-process", pid, fmt::format("PID {} ({}) uses the GPU: end it first (gpureap kill {})",
                                                          pid, command, pid)});
  }
  for (const auto& h : snapshot.holders) {
    if (!h.holds_gpu(gpu_index) || !named.insert(h.pid).second) continue;
    const std::string command = h.linux_process->command();
    if (h.role == HolderRole::Client) {
      r.blockers.push_back({"nvml-client", h.pid,
                            fmt::format("PID {} ({}) is an NVML client (a monitor, exporter or DCGM) holding the GPU: "
                                        "stop it or its service first",
                                        h.pid, command)});
    } else {
      r.blockers.push_back({"holder", h.pid, fmt::format("PID {} ({}) holds /dev/nvidia{}: end it first (gpureap kill {})",
                                                         h.pid, command, gpu->reading.minor_number.value_or(gpu_index), h.pid)});
    }
  }
  if (gpu->reading.persistence_mode == true) {
    r.blockers.push_back({"persistence-mode", std::nullopt,
                          fmt::format("persistence mode is on and counts as a client: stop nvidia-persistenced "
                                      "(or nvidia-smi -i {} -pm 0) first",
                                      gpu_device_id(gpu->reading))});
  }
  return r;
}

AmdResetScope amd_reset_scope(const Snapshot& snapshot, const drm::DrmDevice& device) {
  const auto& reading = snapshot.drm;
  AmdResetScope scope;
  if (device.xgmi_hive_id && *device.xgmi_hive_id != 0) scope.hive_id = device.xgmi_hive_id;
  std::vector<const drm::DrmDevice*> domain = drm::reset_domain_of(reading.devices, device);
  std::stable_partition(domain.begin(), domain.end(),
                        [&](const drm::DrmDevice* d) { return d->pci_address == device.pci_address; });
  if (domain.empty() || domain.front()->pci_address != device.pci_address) domain.insert(domain.begin(), &device);
  for (const drm::DrmDevice* member : domain) {
    AmdResetGpu gpu;
    gpu.pci_address = member->pci_address;
    std::set<pid_t> clients;
    for (const auto* client : reading.clients.clients_of(member->pci_address)) {
      for (const pid_t pid : client->pids()) clients.insert(pid);
    }
    std::set<pid_t> kfd;
    for (const auto& process : reading.kfd_processes) {
      if (drm::kfd_vram_on(reading, process, member->pci_address)) kfd.insert(process.pid);
    }
    gpu.client_pids.assign(clients.begin(), clients.end());
    gpu.kfd_pids.assign(kfd.begin(), kfd.end());
    scope.gpus.push_back(std::move(gpu));
  }
  return scope;
}

std::vector<std::string> AmdResetScope::lines(const Snapshot& snapshot) const {
  std::vector<std::string> out;
  const auto named = [&](const std::vector<pid_t>& pids) {
    std::string list;
    for (const pid_t pid : pids) {
      const ProcessInfo* p = snapshot.table.find(pid);
      list += fmt::format("{}{} ({})", list.empty() ? "" : ", ", pid, p != nullptr ? p->command() : "not visible here");
    }
    return list;
  };
  for (const auto& gpu : gpus) {
    if (gpu.client_pids.empty() && gpu.kfd_pids.empty()) {
      out.push_back(fmt::format("{}: no process uses it", gpu.pci_address));
      continue;
    }
    std::string line = gpu.pci_address + ":";
    if (!gpu.client_pids.empty()) line += " DRM clients " + named(gpu.client_pids);
    if (!gpu.kfd_pids.empty()) line += std::string(gpu.client_pids.empty() ? "" : ";") + " KFD processes " + named(gpu.kfd_pids);
    out.push_back(std::move(line));
  }
  return out;
}

std::vector<std::string> AmdResetScope::details(const Snapshot& snapshot, const drm::DrmDevice& device) const {
  std::vector<std::string> out;
  out.push_back(hive_id ? fmt::format("A reset of GPU {} resets the {} GPU(s) of its XGMI hive {} with it, ending the "
                                      "work of:",
                                      device.pci_address, gpus.size(), *hive_id)
                        : fmt::format("A reset of GPU {} (in no XGMI hive) would end the work of:", device.pci_address));
  for (const auto& line : lines(snapshot)) out.push_back("  " + line);
  return out;
}

std::optional<Remedy> AmdResetScope::remedy(const drm::DrmDevice& device) const {
  const drm::DrmNode* card = device.node(drm::NodeKind::Card);
  if (card == nullptr) return std::nullopt;
  return Remedy{fmt::format("sudo cat /sys/kernel/debug/dri/{}/amdgpu_gpu_recover", card->minor), Risk::High,
                gpus.size() > 1 ? fmt::format("reset GPU {} and the {} other GPU(s) of its XGMI hive (listed above): "
                                              "every process on them loses its work",
                                              device.pci_address, gpus.size() - 1)
                                : fmt::format("reset GPU {}: every process on it (listed above) loses its work",
                                              device.pci_address),
                false};
}

Evidence AmdResetScope::evidence() const {
  EvidenceList list;
  for (const auto& gpu : gpus) {
    list.push_back(Evidence{{"pci_bus_id", gpu.pci_address}, {"client_pids", gpu.client_pids}, {"kfd_pids", gpu.kfd_pids}});
  }
  // As ps --json: a 64-bit identifier as a decimal string.
  return {{"xgmi_hive_id", hive_id ? EvidenceValue(std::to_string(*hive_id)) : EvidenceValue(nullptr)}, {"gpus", list}};
}

std::string gpu_device_id(const GpuReading& gpu) {
  if (!gpu.uuid.empty()) return gpu.uuid;
  if (!gpu.pci_bus_id.empty()) return gpu.pci_bus_id;
  return std::to_string(gpu.index);
}

}  // namespace gpureap
