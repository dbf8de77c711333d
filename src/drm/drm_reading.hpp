// The second GPU source beside NVML: the AMD, Intel and other DRM GPUs of the host, their
// clients from the fdinfo of the descriptors the /proc scan found (counted once per client),
// and ROCm's KFD processes. NVIDIA GPUs keep coming from NVML: a DRM device whose PCI vendor is
// NVIDIA (nvidia-drm) is left out here.
#pragma once

#include <cstddef>
#include <cstdint>
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
};

// The VRAM of the device at `pci_address` that its processes account for: its DRM clients'
// device memory (each client once) and, for ROCm processes holding no DRM client of it, their
// KFD allocations on it. KFD allocations go through the process's render-node client too, so a
// ROCm process with a client here is counted there already.
struct ExplainedVram {
  std::uint64_t clients_bytes = 0;
  std::uint64_t kfd_only_bytes = 0;
  std::uint64_t total() const { return clients_bytes + kfd_only_bytes; }
};
ExplainedVram explained_vram(const DrmReading& reading, const std::string& pci_address);

// The device memory `pid` holds, by PCI address of the reading's devices: each DRM client it
// holds a descriptor of, once (its device memory, 0 when the client reports none), and KFD
// allocations on a GPU where it holds no client (through a client they are counted there
// already). `kfd_pids_are_local`: KFD's PIDs are the initial PID namespace's; false in a child
// one, where its contexts name no process here and are not read.
std::map<std::string, std::uint64_t> device_memory_of_process(const DrmReading& reading, pid_t pid,
                                                              bool kfd_pids_are_local);

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
