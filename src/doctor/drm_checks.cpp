// VRAM of an AMD GPU that no client explains: amdgpu's mem_info_vram_used against the memory
// its DRM clients report in fdinfo (each client once) and, for ROCm processes that hold no DRM
// client of it, their KFD allocations (drm::explained_vram). Read-only: nothing acts on DRM
// holders yet.
#include <fmt/format.h>

#include <algorithm>

#include "doctor/doctor.hpp"
#include "doctor/reset_readiness.hpp"
#include "proc/proc_io.hpp"
#include "text/human_format.hpp"

namespace gpureap {
void check_drm_memory(const Snapshot& snapshot, Diagnosis& diagnosis) {
  const auto& reading = snapshot.drm;
  for (const auto& device : reading.devices) {
    if (!device.vram_used) continue;  // i915 and xe have no device total: nothing to compare
    const auto explained_parts = drm::explained_vram(reading, device.pci_address);
    const std::uint64_t explained = explained_parts.total();
    const std::uint64_t kfd_only = explained_parts.kfd_only_bytes;
    const std::uint64_t used = *device.vram_used;
    if (used <= explained) continue;
    const std::uint64_t unexplained = used - explained;
    const std::uint64_t allowance = drm::driver_vram_allowance(device.vram_total);
    if (unexplained <= allowance) continue;
    std::size_t hidden = 0;  // processes whose descriptors we could not read, as memory_checks counts them
    for (const auto& [pid, process] : snapshot.table.processes()) {
      if (process.fd_access == FdAccess::Denied && !process.kernel_thread && !procfs::denial_hides_nothing(pid)) ++hidden;
    }
    const bool incomplete = reading.fdinfo_unread > 0 || hidden > 0;
    Finding f;
    f.id = FindingId::DrmMemoryUnexplained;
    f.severity = incomplete ? Severity::Info : Severity::Warning;
    f.gpu_pci = device.pci_address;
    f.summary = fmt::format("{} GPU {}: {} of VRAM in use that no client explains ({} used, {} reported by its clients)",
                            drm::gpu_vendor_name(device.vendor), device.pci_address, format_bytes(unexplained),
                            format_bytes(used), format_bytes(explained));
    f.details.push_back(fmt::format(
        "allowed for the driver's own use: {}; the clients' memory is what their fdinfo reports (each client once)",
        format_bytes(allowance)));
    if (incomplete) {
      f.details.push_back(fmt::format(
          "{} DRM descriptor(s) had no readable client stats and {} process(es) could not be inspected: "
          "their memory may be the rest (run as root)",
          reading.fdinfo_unread, hidden));
    }
    f.details.push_back("known from the kernel's documents only: no AMD hardware has run this check");
    // What a reset would take with it, as report_leak says it for an NVIDIA GPU.
    const AmdResetScope reset = amd_reset_scope(snapshot, device);
    for (auto& line : reset.details(snapshot, device)) f.details.push_back(std::move(line));
    f.evidence = Evidence{{"pci_bus_id", device.pci_address},
                  {"vendor", std::string(drm::gpu_vendor_name(device.vendor))},
                  {"driver", device.driver},
                  {"vram_used_bytes", used},
                  {"vram_total_bytes", EvidenceValue(device.vram_total)},
                  {"clients_bytes", explained - kfd_only},
                  {"kfd_only_bytes", kfd_only},
                  {"unexplained_bytes", unexplained},
                  {"driver_allowance_bytes", allowance},
                  {"fdinfo_unread", reading.fdinfo_unread},
                  {"processes_not_inspected", hidden}};
    f.remedies.push_back(Remedy{"gpureap ps --json", Risk::None,
                                "lists the GPU's clients, the holders without stats and the KFD processes", false});
    f.evidence["reset"] = reset.evidence();
    if (auto remedy = reset.remedy(device)) f.remedies.push_back(std::move(*remedy));
    diagnosis.findings.push_back(std::move(f));
  }
}

}  // namespace gpureap
