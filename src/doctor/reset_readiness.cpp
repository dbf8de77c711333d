#include "doctor/reset_readiness.hpp"

#include <unistd.h>

#include <set>

#include <fmt/format.h>

namespace gpureap {

nlohmann::json ResetReadiness::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& b : blockers) {
    list.push_back({{"kind", b.kind}, {"pid", b.pid ? nlohmann::json(*b.pid) : nlohmann::json(nullptr)}, {"text", b.text}});
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

std::string gpu_device_id(const GpuReading& gpu) {
  if (!gpu.uuid.empty()) return gpu.uuid;
  if (!gpu.pci_bus_id.empty()) return gpu.pci_bus_id;
  return std::to_string(gpu.index);
}

}  // namespace gpureap
