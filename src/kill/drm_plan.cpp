// What ending the targets should give back on AMD and Intel GPUs. A DRM client is one open file
// description of the GPU's node: it goes away only when every process holding a descriptor of
// it has ended, so a client that a process outside the plan also holds (passed over a socket,
// inherited by a process that is spared) is expected to stay. Shared buffers (drm-shared-*)
// stay alive in the clients that imported them, so only a client's private memory is expected
// back. KFD allocations are counted once: through the render client when the process has one
// on that GPU (drm_reading.hpp), on their own otherwise.
#include <algorithm>
#include <map>
#include <set>

#include "drm/client_ledger.hpp"
#include "drm/fdinfo_record.hpp"
#include "kill/kill_plan.hpp"

namespace gpureap {
namespace {

bool plan_has(const std::vector<pid_t>& pids, pid_t pid) { return std::find(pids.begin(), pids.end(), pid) != pids.end(); }

PlannedDrmGpu& gpu_entry(std::map<std::string, PlannedDrmGpu>& gpus, const drm::DrmDevice& device) {
  auto& gpu = gpus[device.pci_address];
  if (gpu.pci_address.empty()) {
    gpu.pci_address = device.pci_address;
    gpu.vendor = std::string(drm::gpu_vendor_name(device.vendor));
    gpu.driver = device.driver;
    gpu.baseline_used = device.vram_used;
  }
  return gpu;
}

void add_target_pid(PlannedDrmGpu& gpu, pid_t pid) {
  if (!plan_has(gpu.target_pids, pid)) gpu.target_pids.push_back(pid);
}

// Each client a target holds: ending when only targets hold it, kept when someone else does.
void plan_clients(std::map<std::string, PlannedDrmGpu>& gpus, const drm::DrmReading& reading,
                  const std::vector<pid_t>& signalled) {
  for (const auto& client : reading.clients.clients()) {
    const drm::DrmDevice* device = reading.device_at(client.pdev);
    if (device == nullptr) continue;
    const std::vector<pid_t> holders = client.pids();
    if (std::none_of(holders.begin(), holders.end(), [&](pid_t pid) { return plan_has(signalled, pid); })) continue;
    auto& gpu = gpu_entry(gpus, *device);
    PlannedDrmClient planned;
    const auto identity = drm::client_identity(client.stats);
    planned.identity = identity.value_or(0);
    planned.by_pasid = client.client_id == 0;
    planned.device_bytes = drm::device_memory_bytes(client.stats).value_or(0);
    planned.shared_bytes = std::min(planned.device_bytes, drm::shared_device_bytes(client.stats).value_or(0));
    planned.holders = holders;
    for (pid_t pid : holders) {
      if (plan_has(signalled, pid)) {
        add_target_pid(gpu, pid);
      } else {
        planned.outside_holders.push_back(pid);
      }
    }
    // A record without identity cannot be found again after the kill: it is neither expected
    // to go nor to stay, and its memory is not counted on.
    if (!identity) continue;
    if (planned.outside_holders.empty()) {
      gpu.expected_free_bytes += planned.device_bytes - planned.shared_bytes;
      gpu.ending.push_back(std::move(planned));
    } else {
      gpu.kept.push_back(std::move(planned));
    }
  }
}

// Each KFD context whose every keeper is signalled, on each GPU it has memory on.
void plan_kfd_contexts(std::map<std::string, PlannedDrmGpu>& gpus, const Snapshot& snapshot,
                       const std::vector<pid_t>& signalled) {
  const drm::DrmReading& reading = snapshot.drm;
  for (const auto& process : reading.kfd_processes) {
    // Who keeps the context: its own process, or (its process gone) the holders of its /dev/kfd
    // and render client. It goes only when every one of them has ended.
    std::vector<pid_t> keepers;
    if (snapshot.owns_kfd_context(process.pid)) {
      keepers.push_back(process.pid);
    } else {
      keepers = snapshot.kfd_context_holders(process.pid);
    }
    if (keepers.empty() || !std::all_of(keepers.begin(), keepers.end(), [&](pid_t pid) { return plan_has(signalled, pid); })) {
      continue;
    }
    for (const auto& device : reading.devices) {
      const auto bytes = drm::kfd_vram_on(reading, process, device.pci_address);
      if (!bytes) continue;  // no context on this GPU
      auto& gpu = gpu_entry(gpus, device);
      gpu.kfd_pids.push_back(process.pid);
      bool through_client = false;
      for (const pid_t keeper : keepers) {
        add_target_pid(gpu, keeper);
        const auto held = reading.clients.clients_held_by(keeper);
        through_client = through_client || std::any_of(held.begin(), held.end(), [&](const drm::DrmClient* c) {
                           return c->pdev == device.pci_address;
                         });
      }
      if (!through_client) gpu.expected_free_bytes += *bytes;
    }
  }
}

// The figures the release is judged against: shared memory of the ending clients, the
// driver's allowance, what was unexplained before, and what the other clients hold.
void set_drm_baseline(PlannedDrmGpu& gpu, const std::string& pci, const drm::DrmReading& reading) {
  std::set<std::uint64_t> ending_ids;
  for (const auto& c : gpu.ending) {
    ending_ids.insert(c.identity);
    gpu.shared_ending += c.shared_bytes;
  }
  const drm::DrmDevice* device = reading.device_at(pci);
  gpu.driver_allowance = drm::driver_vram_allowance(device != nullptr ? device->vram_total : std::nullopt);
  if (gpu.baseline_used) {
    const std::uint64_t explained = drm::explained_vram(reading, pci).total();
    gpu.unexplained_base = *gpu.baseline_used > explained ? *gpu.baseline_used - explained : 0;
  }
  for (const drm::DrmClient* client : reading.clients.clients_of(pci)) {
    const auto identity = drm::client_identity(client->stats);
    if (identity && ending_ids.count(*identity) != 0) continue;
    gpu.others_bytes += drm::device_memory_bytes(client->stats).value_or(0);
  }
  std::sort(gpu.target_pids.begin(), gpu.target_pids.end());
}

}  // namespace

void plan_drm_gpus(KillPlan& plan, const Snapshot& snapshot) {
  const drm::DrmReading& reading = snapshot.drm;
  if (reading.devices.empty()) return;
  std::vector<pid_t> signalled;
  for (const auto& t : plan.targets) {
    if (t.actionable()) signalled.push_back(t.pid);
  }

  // Each target's memory, for the plan's table: every client it holds (each once), and KFD
  // allocations it made outside a client of that GPU.
  for (auto& target : plan.targets) {
    for (const auto& [pci, bytes] : snapshot.drm_memory_of(target.pid)) target.drm_memory[pci] += bytes;
  }
  if (signalled.empty()) return;

  std::map<std::string, PlannedDrmGpu> gpus;
  plan_clients(gpus, reading, signalled);
  plan_kfd_contexts(gpus, snapshot, signalled);
  for (auto& [pci, gpu] : gpus) {
    set_drm_baseline(gpu, pci, reading);
    plan.drm_gpus.push_back(std::move(gpu));
  }
}

}  // namespace gpureap
