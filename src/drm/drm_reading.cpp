#include "drm/drm_reading.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <fcntl.h>

#include "drm/fdinfo_record.hpp"
#include "proc/proc_io.hpp"

namespace gpureap::drm {

const DrmDevice* DrmReading::device_with_minor(unsigned minor) const {
  for (const auto& device : devices) {
    if (device.has_minor(minor)) return &device;
  }
  return nullptr;
}

const DrmDevice* DrmReading::device_at(const std::string& pci_address) const {
  for (const auto& device : devices) {
    if (device.pci_address == pci_address) return &device;
  }
  return nullptr;
}

std::optional<std::uint64_t> kfd_vram_on(const DrmReading& reading, const KfdProcess& process,
                                         const std::string& pci_address) {
  std::optional<std::uint64_t> sum;
  for (const auto& memory : process.vram) {
    if (kfd_gpu_pci_address(reading, memory.gpu_id) == pci_address) sum = sum.value_or(0) + memory.vram_bytes;
  }
  return sum;
}

std::string kfd_gpu_pci_address(const DrmReading& reading, std::uint32_t gpu_id) {
  for (const auto& node : reading.kfd_nodes) {
    if (node.gpu_id == gpu_id) return node.pci_address;
  }
  return {};
}

ExplainedVram explained_vram(const DrmReading& reading, const std::string& pci_address) {
  ExplainedVram out;
  out.clients_bytes = reading.clients.device_memory_of(pci_address).value_or(0);
  std::vector<pid_t> client_pids;
  std::vector<std::uint32_t> client_pasids;
  for (const auto* client : reading.clients.clients_of(pci_address)) {
    for (const pid_t pid : client->pids()) client_pids.push_back(pid);
    if (client->stats.pasid && *client->stats.pasid != 0) client_pasids.push_back(*client->stats.pasid);
  }
  std::vector<std::uint32_t> ids;
  for (const auto& node : reading.kfd_nodes) {
    if (node.pci_address == pci_address) ids.push_back(node.gpu_id);
  }
  for (const auto& process : reading.kfd_processes) {
    if (std::find(client_pids.begin(), client_pids.end(), process.pid) != client_pids.end()) continue;
    // Its process gone, the context's VM is still a client's: the one whose pasid it has.
    if (process.pasid && std::find(client_pasids.begin(), client_pasids.end(), *process.pasid) != client_pasids.end()) {
      continue;
    }
    for (const auto& memory : process.vram) {
      if (std::find(ids.begin(), ids.end(), memory.gpu_id) != ids.end()) out.kfd_only_bytes += memory.vram_bytes;
    }
  }
  return out;
}

std::uint64_t driver_vram_allowance(std::optional<std::uint64_t> vram_total) {
  return std::max<std::uint64_t>(512ull << 20, vram_total.value_or(0) / 50);
}

std::map<std::string, std::uint64_t> device_memory_of_process(const DrmReading& reading, pid_t pid,
                                                              bool owns_kfd_context) {
  std::map<std::string, std::uint64_t> out;
  for (const DrmClient* client : reading.clients.clients_held_by(pid)) {
    if (reading.device_at(client->pdev) != nullptr) out[client->pdev] += device_memory_bytes(client->stats).value_or(0);
  }
  if (!owns_kfd_context) return out;
  const std::map<std::string, std::uint64_t> through_clients = out;
  for (const auto& process : reading.kfd_processes) {
    if (process.pid != pid) continue;
    for (const auto& memory : process.vram) {
      for (const auto& node : reading.kfd_nodes) {
        if (node.gpu_id != memory.gpu_id || reading.device_at(node.pci_address) == nullptr) continue;
        // On a GPU it holds a client of, they are counted through the client already.
        if (memory.vram_bytes > 0 && through_clients.count(node.pci_address) == 0) out[node.pci_address] += memory.vram_bytes;
      }
    }
  }
  return out;
}

std::size_t add_fdinfo_clients(ClientLedger& ledger, const std::string& proc_root, pid_t pid,
                               const std::vector<DeviceFileHandle>& files) {
  std::size_t unread = 0;
  char name[24];
  *std::to_chars(name, name + sizeof name - 1, pid).ptr = '\0';
  const procfs::unique_fd root = procfs::open_dir_at(AT_FDCWD, proc_root.c_str(), /*no_follow=*/false);
  const procfs::unique_fd process =
      root ? procfs::open_dir_at(root.get(), name, /*no_follow=*/true) : procfs::unique_fd();
  const procfs::unique_fd fdinfo =
      process ? procfs::open_dir_at(process.get(), "fdinfo", /*no_follow=*/true) : procfs::unique_fd();
  procfs::ReadBuffer buffer(4096);
  for (const auto& file : files) {
    if (file.kind != DeviceFileKind::DrmCard && file.kind != DeviceFileKind::DrmRender) continue;
    if (!fdinfo) {
      ++unread;
      continue;
    }
    char fd_name[16];
    *std::to_chars(fd_name, fd_name + sizeof fd_name - 1, file.fd).ptr = '\0';
    const auto text = buffer.read_file_at(fdinfo.get(), fd_name, kMaxFdinfoBytes);
    auto record = text ? parse_drm_fdinfo(*text) : std::nullopt;
    if (!record) {
      ++unread;
      continue;
    }
    ledger.add(pid, file.fd, std::move(*record));
  }
  return unread;
}

std::vector<DrmDevice> read_gpu_devices(const std::string& sysfs_root) {
  std::vector<DrmDevice> devices = read_drm_devices(sysfs_root);
  // NVIDIA's come from NVML; virtual and display-only adapters (bochs, virtio, ASPEED's BMC
  // display) hold no compute memory worth a row.
  std::erase_if(devices, [](const DrmDevice& d) { return d.vendor != GpuVendor::Amd && d.vendor != GpuVendor::Intel; });
  return devices;
}

DrmReading read_drm(const DrmReadOptions& options, const ProcessTable& table) {
  DrmReading reading;
  reading.devices = read_gpu_devices(options.sysfs_root);
  reading.kfd_nodes = read_kfd_topology(options.sysfs_root);
  if (reading.devices.empty() && reading.kfd_nodes.empty()) return reading;
  std::vector<pid_t> holders;
  for (const auto& [pid, process] : table.processes()) {
    if (process.holds_any_drm_file()) holders.push_back(pid);
  }
  std::sort(holders.begin(), holders.end());  // clients list their holders in PID order
  for (const pid_t pid : holders) {
    reading.fdinfo_unread += add_fdinfo_clients(reading.clients, options.proc_root, pid, table.find(pid)->drm_files);
  }
  for (const pid_t pid : list_kfd_processes(options.sysfs_root)) {
    if (auto process = read_kfd_process(options.sysfs_root, pid)) reading.kfd_processes.push_back(std::move(*process));
  }
  return reading;
}

}  // namespace gpureap::drm
