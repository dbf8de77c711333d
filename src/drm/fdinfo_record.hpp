// One DRM file descriptor's /proc/<pid>/fdinfo/<fd>, as the kernel's
// Documentation/gpu/drm-usage-stats.rst defines it: the client's identity (drm-driver,
// drm-pdev, drm-client-id), its engines' busy time and its memory per region. amdgpu, i915,
// xe, msm, panfrost, panthor, v3d, ivpu and amdxdna print it; /dev/nvidia* has none. amdgpu's
// own format of 5.14 to 5.18 (fdinfo_amdgpu_legacy.hpp) gives the same record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpureap::drm {

// What a fdinfo file may hold before the rest is ignored: the kernel's are under 4 KiB.
inline constexpr std::size_t kMaxFdinfoBytes = 64 * 1024;
inline constexpr std::size_t kMaxRegions = 32;
inline constexpr std::size_t kMaxEngines = 64;
inline constexpr std::size_t kMaxNameLength = 64;

// Memory of one region ("vram", "gtt", "vram0", "system0", "stolen-local0", "memory"), in bytes.
// A key the file does not have stays nullopt: unknown is not zero.
struct RegionMemory {
  std::string region;
  std::optional<std::uint64_t> total;      // drm-total-<region>, or amdgpu's drm-memory-<region>
  std::optional<std::uint64_t> shared;     // drm-shared-<region>: buffers shared with other clients
  std::optional<std::uint64_t> resident;   // drm-resident-<region>
  std::optional<std::uint64_t> purgeable;  // drm-purgeable-<region>
  std::optional<std::uint64_t> active;     // drm-active-<region>
  // `total` came from drm-memory-<region> (amdgpu since 5.19, an alias of drm-total- per the
  // document), or from the "vram mem:" line of amdgpu before 5.19, the same number; a
  // drm-total-<region> line in the same file replaces it.
  bool total_from_memory_key = false;
};

// One engine class ("gfx", "render", "rcs", "npu-amdxdna").
struct EngineUsage {
  std::string engine;
  std::optional<std::uint64_t> busy_ns;       // drm-engine-<engine>: <uint> ns
  std::uint64_t capacity = 1;                 // drm-engine-capacity-<engine>; 1 when absent
  std::optional<std::uint64_t> cycles;        // drm-cycles-<engine> (xe)
  std::optional<std::uint64_t> total_cycles;  // drm-total-cycles-<engine> (xe)
};

// Which text the record was read from.
enum class FdinfoFormat {
  DrmUsageStats,    // drm-driver, drm-pdev, drm-client-id, drm-<key>-<region>
  AmdgpuBefore519,  // pdev, pasid, "vram mem", "gtt mem", "cpu mem": no client id, no engine times
};

struct DrmFdinfo {
  FdinfoFormat format = FdinfoFormat::DrmUsageStats;
  std::string driver;                    // drm-driver (mandatory: without it there is no record)
  std::string pdev;                      // drm-pdev, "dddd:bb:dd.f" in lower case; empty when absent
  std::optional<std::uint64_t> client_id;  // drm-client-id
  std::optional<std::uint32_t> pasid;    // amdgpu's "pasid:" line (the KFD directory has it too)
  std::vector<RegionMemory> regions;     // in the order of their first line
  std::vector<EngineUsage> engines;
  // drm- lines whose value was not what the document defines (an engine time without "ns", a
  // memory value with an unknown unit, a malformed drm-pdev), and drm- keys past the limits
  // above: counted so that a view can say that something was not read, never guessed.
  std::size_t lines_not_understood = 0;
  bool cut = false;  // the text was longer than kMaxFdinfoBytes

  const RegionMemory* region(std::string_view name) const;
  const EngineUsage* engine(std::string_view name) const;
};

// The record of a file with a valid drm-driver line; without one, the record of amdgpu's format
// before 5.19 when the file is that (a valid pdev line and a memory line); otherwise nullopt
// (not a DRM client: a /dev/nvidia* or a plain file's fdinfo). Reads at most kMaxFdinfoBytes;
// lines other than drm-*, pasid, the old format's and the generic pos/flags/mnt_id/ino are
// ignored.
std::optional<DrmFdinfo> parse_drm_fdinfo(std::string_view text);

// Whether memory of `region` is the device's own (VRAM): amdgpu's "vram", xe's "vram0".."vramN",
// i915's "local0".."localN". GTT, system and stolen memory are host memory the GPU maps.
bool is_device_memory_region(std::string_view region);

// The client's device memory: the sum of `total` over device regions, nullopt when no device
// region has one. `shared_device_bytes`: the same over `shared`.
std::optional<std::uint64_t> device_memory_bytes(const DrmFdinfo& record);
std::optional<std::uint64_t> shared_device_bytes(const DrmFdinfo& record);

// A PCI address as drm-pdev and sysfs print it ("0000:08:00.0"), checked and lower-cased;
// nullopt otherwise.
std::optional<std::string> canonical_pci_address(std::string_view text);

}  // namespace gpureap::drm
