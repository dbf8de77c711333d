// ROCm compute through /dev/kfd: while a process has a KFD context the kernel keeps
// <sysfs>/class/kfd/kfd/proc/<pid>/ with its `pasid` and one `vram_<gpu_id>` file per GPU (bytes
// of VRAM the process has allocated there). A GPU's gpu_id is in the KFD topology,
// <sysfs>/class/kfd/kfd/topology/nodes/<n>/gpu_id (0 for CPU nodes), and its PCI address in
// that node's `properties` (domain, and location_id = bus << 8 | device << 3 | function).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace gpureap::drm {

struct KfdGpuMemory {
  std::uint32_t gpu_id = 0;
  std::uint64_t vram_bytes = 0;
};

struct KfdProcess {
  pid_t pid = 0;
  std::optional<std::uint32_t> pasid;
  std::vector<KfdGpuMemory> vram;  // by gpu_id
};

struct KfdNode {
  std::uint32_t gpu_id = 0;
  std::string pci_address;  // empty when the properties do not give it
};

// "vram_46412" -> 46412; nullopt for other names (sdma_*, stats_*, queues, pasid).
std::optional<std::uint32_t> gpu_id_of_vram_file(std::string_view name);

// A topology node's `properties` text ("location_id 768\ndomain 0\n..."): the PCI address it
// names, or nullopt without location_id.
std::optional<std::string> pci_address_of_kfd_properties(std::string_view text);

// The PIDs with a directory under <sysfs_root>/class/kfd/kfd/proc; empty when there is none
// (no ROCm driver, or no process has a KFD context).
std::vector<pid_t> list_kfd_processes(const std::string& sysfs_root);

// <sysfs_root>/class/kfd/kfd/proc/<pid>; nullopt when the process has no KFD context (or the
// directory cannot be read).
std::optional<KfdProcess> read_kfd_process(const std::string& sysfs_root, pid_t pid);

// The GPU nodes of the KFD topology (gpu_id != 0), by gpu_id.
std::vector<KfdNode> read_kfd_topology(const std::string& sysfs_root);

}  // namespace gpureap::drm
