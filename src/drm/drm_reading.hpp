// The second GPU source beside NVML: the AMD, Intel and other DRM GPUs of the host, their
// clients from the fdinfo of the descriptors the /proc scan found (counted once per client),
// and ROCm's KFD processes. NVIDIA GPUs keep coming from NVML: a DRM device whose PCI vendor is
// NVIDIA (nvidia-drm) is left out here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <map>
#include <string>
#include <vector>

#include <sys/types.h>

#include "drm/client_ledger.hpp"
#include "drm/device_sysfs.hpp"
#include "drm/kfd_process.hpp"
#include "proc/process_info.hpp"
#include "proc/process_table.hpp"

namespace gpureap::drm {

struct DrmReadOptions {
  std::string sysfs_root = "/sys";  // GPUREAP_SYS_DIR in tests
  std::string proc_root = "/proc";  // where <pid>/fdinfo/<fd> is read (GPUREAP_FDINFO_DIR in tests)
};

struct DrmReading {
  std::vector<DrmDevice> devices;  // AMD's and Intel's, by PCI address
  ClientLedger clients;
  std::vector<KfdProcess> kfd_processes;
  std::vector<KfdNode> kfd_nodes;
  // DRM descriptors whose fdinfo could not be read (another user's process when not root, or
  // closed since the scan) or had no drm-driver line: their memory is unknown.
  std::size_t fdinfo_unread = 0;

  const DrmDevice* device_with_minor(unsigned minor) const;
  const DrmDevice* device_at(const std::string& pci_address) const;  // null when not among `devices`
};

// The VRAM a KFD process has allocated on the device at `pci_address` (its vram_<gpu_id> files
// whose topology node is that device); nullopt when it has none there.
std::optional<std::uint64_t> kfd_vram_on(const DrmReading& reading, const KfdProcess& process,
                                         const std::string& pci_address);
// The PCI address of a KFD gpu_id from the topology; "" when no node gives one.
std::string kfd_gpu_pci_address(const DrmReading& reading, std::uint32_t gpu_id);

// The VRAM of the device at `pci_address` that its processes account for: its DRM clients'
// device memory (each client once) and, for ROCm processes holding no DRM client of it, their
// KFD allocations on it. KFD allocations go through the process's render-node client too, so a
// ROCm process with a client here is counted there already, and so is a context whose pasid a
// client here has (the render file whose VM KFD took, held by a worker after its process died).
struct ExplainedVram {
  std::uint64_t clients_bytes = 0;
  std::uint64_t kfd_only_bytes = 0;
  std::uint64_t total() const { return clients_bytes + kfd_only_bytes; }
};
ExplainedVram explained_vram(const DrmReading& reading, const std::string& pci_address);

// What the driver uses itself (firmware, page tables, its own buffers) is not reported per
// client: 512 MiB, or 2% of the GPU's VRAM when more. A guess from the documents, not a
// measurement: no AMD hardware has run this. doctor allows it before calling VRAM unexplained;
// kill before it attributes a drop of the device's figure to its targets.
std::uint64_t driver_vram_allowance(std::optional<std::uint64_t> vram_total);

// The device memory `pid` holds, by PCI address of the reading's devices: each DRM client it
// holds a descriptor of, once (its device memory, 0 when the client reports none), and KFD
// allocations on a GPU where it holds no client (through a client they are counted there
// already). `owns_kfd_context`: whether the KFD context listed under `pid` is this process's:
// it holds /dev/kfd (the kernel keeps a context while any descriptor of its /dev/kfd file is
// left, under its leader's PID, which may be reused) and gpureap is not in a child PID namespace
// (KFD's PIDs are the initial namespace's). Without it KFD is not read.
std::map<std::string, std::uint64_t> device_memory_of_process(const DrmReading& reading, pid_t pid,
                                                              bool owns_kfd_context);

// Reads <proc_root>/<pid>/fdinfo/<fd> of each card and render descriptor of `files` (bounded
// to kMaxFdinfoBytes) into `ledger`; returns how many could not be read or parsed.
std::size_t add_fdinfo_clients(ClientLedger& ledger, const std::string& proc_root, pid_t pid,
                               const std::vector<DeviceFileHandle>& files);

// The AMD and Intel GPUs in sysfs (read_drm_devices less NVIDIA's, which NVML gives, and
// virtual or display-only adapters).
std::vector<DrmDevice> read_gpu_devices(const std::string& sysfs_root);

// Devices from sysfs; when there is any that is not NVIDIA's, the clients of every process in
// `table` holding a DRM file, and the KFD processes. Nothing is read from /proc when the host has
// no such device, so an NVIDIA-only host pays one directory listing.
DrmReading read_drm(const DrmReadOptions& options, const ProcessTable& table);

}  // namespace gpureap::drm
