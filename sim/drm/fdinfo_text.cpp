#include "drm/fdinfo_text.hpp"

#include <fmt/core.h>

namespace gpusim::drm {
namespace {

constexpr std::uint64_t KiB = 1024;

struct RegionStats {
  std::uint64_t total = 0, shared = 0, resident = 0;
};

enum Supported : unsigned { kActive = 1, kResident = 2, kPurgeable = 4 };

// drm_print_memory_stats()
void memory_stats(std::string& out, const char* region, const RegionStats& s, unsigned supported) {
  out += fmt::format("drm-total-{}:\t{}\n", region, drm_size(s.total));
  out += fmt::format("drm-shared-{}:\t{}\n", region, drm_size(s.shared));
  if (supported & kActive) out += fmt::format("drm-active-{}:\t{}\n", region, drm_size(0));
  if (supported & kResident) out += fmt::format("drm-resident-{}:\t{}\n", region, drm_size(s.resident));
  if (supported & kPurgeable) out += fmt::format("drm-purgeable-{}:\t{}\n", region, drm_size(0));
}

// drm_show_fdinfo(): the keys the DRM core prints before the driver's.
void core_keys(std::string& out, const DrmDevice& d, const ClientRecord& c) {
  out += fmt::format("drm-driver:\t{}\ndrm-client-id:\t{}\ndrm-pdev:\t{}\n", d.driver, c.id, d.pci);
}

RegionStats device_memory(const ClientRecord& c) { return {c.vram, c.shared, c.vram}; }
RegionStats host_memory(std::uint64_t bytes) { return {bytes, 0, bytes}; }

void amdgpu_current(std::string& out, const DrmDevice& d, const ClientRecord& c, std::uint64_t busy) {
  core_keys(out, d, c);
  out += fmt::format("pasid:\t{}\n", c.pasid);
  memory_stats(out, "vram", device_memory(c), kResident | kPurgeable);
  memory_stats(out, "gtt", host_memory(c.gtt), kResident | kPurgeable);
  for (const char* region : {"cpu", "gds", "gws", "oa", "doorbell", "mmioremap"}) {
    memory_stats(out, region, {}, kResident | kPurgeable);
  }
  out += fmt::format("drm-memory-vram:\t{} KiB\n", c.vram / KiB);
  out += fmt::format("drm-memory-gtt: \t{} KiB\n", c.gtt / KiB);
  out += fmt::format("drm-memory-cpu: \t{} KiB\n", 0);
  out += fmt::format("amd-evicted-vram:\t{} KiB\n", 0);
  out += fmt::format("amd-requested-vram:\t{} KiB\n", c.vram / KiB);
  out += fmt::format("amd-requested-gtt:\t{} KiB\n", c.gtt / KiB);
  if (busy > 0) out += fmt::format("drm-engine-gfx:\t{} ns\n", busy);
}

void amdgpu_legacy(std::string& out, const DrmDevice& d, const ClientRecord& c) {
  out += fmt::format("pdev:\t{}\npasid:\t{}\n", d.pci, c.pasid);
  out += fmt::format("vram mem:\t{} kB\ngtt mem:\t{} kB\ncpu mem:\t{} kB\n", c.vram / KiB, c.gtt / KiB, 0);
  // perc = 10000 * busy / elapsed, printed "%d.%d%%" as perc/100, perc%100.
  if (c.busy_percent > 0) {
    const unsigned perc = c.busy_percent * 100;
    out += fmt::format("gfx0:\t{}.{}%\n", perc / 100, perc % 100);
  }
}

void i915(std::string& out, const DrmDevice& d, const ClientRecord& c, std::uint64_t busy) {
  core_keys(out, d, c);
  const unsigned supported = kActive | kResident | kPurgeable;
  memory_stats(out, "system0", host_memory(c.gtt), supported);
  if (d.vram_total > 0) memory_stats(out, "local0", device_memory(c), supported);
  out += fmt::format("drm-engine-render:\t{} ns\n", busy);
  for (const char* engine : {"copy", "video", "video-enhance"}) out += fmt::format("drm-engine-{}:\t0 ns\n", engine);
  out += "drm-engine-capacity-video:\t2\n";
}

void xe(std::string& out, const DrmDevice& d, const ClientRecord& c, std::int64_t now_ns) {
  core_keys(out, d, c);
  const unsigned supported = kActive | kResident | kPurgeable;
  memory_stats(out, "system", host_memory(0), supported);
  memory_stats(out, "gtt", host_memory(c.gtt), supported);
  memory_stats(out, "vram0", device_memory(c), supported);
  // The GPU timestamp ticks at 19.2 MHz (52 ns a tick, near enough).
  const std::uint64_t total = static_cast<std::uint64_t>(now_ns) / 52;
  const std::uint64_t run = busy_ns(c, now_ns) / 52;
  for (const char* engine : {"rcs", "bcs", "vcs", "vecs", "ccs"}) {
    out += fmt::format("drm-cycles-{}:\t{}\n", engine, std::string(engine) == "ccs" ? run : 0);
    out += fmt::format("drm-total-cycles-{}:\t{}\n", engine, total);
  }
  out += "drm-engine-capacity-vcs:\t2\ndrm-engine-capacity-ccs:\t4\n";
}

}  // namespace

std::string drm_size(std::uint64_t bytes) {
  static const char* const units[] = {"", " KiB", " MiB"};
  unsigned u = 0;
  for (; u < 2; ++u) {
    if (bytes == 0 || bytes % KiB != 0) break;
    bytes /= KiB;
  }
  return std::to_string(bytes) + units[u];
}

std::uint64_t busy_ns(const ClientRecord& client, std::int64_t now_ns) {
  if (now_ns <= client.start_ns) return 0;
  const auto elapsed = static_cast<std::uint64_t>(now_ns - client.start_ns);
  return elapsed / 100 * client.busy_percent;
}

std::string fdinfo_text(const DrmDevice& device, const ClientRecord& client, std::int64_t now_ns,
                        const std::string& generic) {
  std::string out = generic;
  if (device.driver == "amdgpu") {
    if (device.fdinfo == FdinfoFormat::Legacy) {
      amdgpu_legacy(out, device, client);
    } else {
      amdgpu_current(out, device, client, busy_ns(client, now_ns));
    }
  } else if (device.driver == "xe") {
    xe(out, device, client, now_ns);
  } else {
    i915(out, device, client, busy_ns(client, now_ns));
  }
  return out;
}

}  // namespace gpusim::drm
