#include "ctl/topology.hpp"

#include <fmt/core.h>

namespace gpusim::ctl {

static constexpr unsigned kBuses[] = {0x17, 0x2A, 0x3D, 0x63, 0xAB, 0xBD, 0xCF, 0xE1};
static constexpr unsigned kBusesPerDomain = sizeof(kBuses) / sizeof(kBuses[0]);

Gpu make_gpu(unsigned index, unsigned minor, const std::string& name, std::uint64_t memory_total,
             std::uint64_t memory_reserved) {
  Gpu g;
  g.name = name;
  g.uuid = fmt::format("GPU-5b3f0c{:02x}-0000-4000-8000-{:012x}", index & 0xFF, index);
  g.pci_domain = index / kBusesPerDomain;
  g.pci_bus = kBuses[index % kBusesPerDomain];
  g.pci_device = 0;
  g.pci_device_id = 0x233010DEu;     // H100 SXM5 (0x2330), NVIDIA (0x10DE)
  g.pci_subsystem_id = 0x16C110DEu;
  g.minor = minor;
  g.memory_total = memory_total;
  g.memory_reserved = memory_reserved;
  return g;
}

// mig-minors numbering: "config" 1, "monitor" 2, then per GPU minor 15 GPU instances of
// 9 entries each (the GI's access node, then CI 0..7).
static unsigned gi_access_minor(unsigned gpu_minor, unsigned gi) {
  return 3 + gpu_minor * 15 * 9 + gi * 9;
}

void make_mig_instances(Gpu& gpu, unsigned gpu_index, unsigned count) {
  gpu.mig.clear();
  gpu.mig_enabled = true;
  unsigned slices = count >= kMaxMigSlots ? 1 : kMaxMigSlots / count;
  // Instance sizes are whole MiB, like the driver's memory slices.
  std::uint64_t per = (gpu.memory_total / count) & ~((std::uint64_t{1} << 20) - 1);
  for (unsigned i = 0; i < count; ++i) {
    MigInstance m;
    m.gi = i + 1;
    m.ci = 0;
    m.name = fmt::format("MIG {}g.{}gb", slices, per >> 30);
    m.uuid = fmt::format("MIG-5b3f0c{:02x}-{:04x}-4000-8000-{:012x}", gpu_index & 0xFF, m.gi,
                         gpu_index * 16 + m.gi);
    m.memory_total = per;
    m.cap_gi_minor = gi_access_minor(gpu.minor, m.gi);
    m.cap_ci_minor = m.cap_gi_minor + 1 + m.ci;
    gpu.mig.push_back(std::move(m));
  }
}

}  // namespace gpusim::ctl
