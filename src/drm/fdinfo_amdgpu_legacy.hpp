// amdgpu's own fdinfo format, Linux 5.14 to 5.18, from before the driver printed the keys of
// Documentation/gpu/drm-usage-stats.rst. Kernel commit "drm/amdgpu: Add show_fdinfo() interface"
// (David M Nieto, Roy Sun; amd-gfx, 2021-04-23; drivers/gpu/drm/amd/amdgpu/amdgpu_fdinfo.c)
// prints, per open file description of an amdgpu device:
//
//   pdev:\t%04x:%02x:%02x.%d      the device's PCI address
//   pasid:\t%u                   the process address space id of this file's VM
//   vram mem:\t%llu kB           bytes / 1024: "kB" is KiB
//   gtt mem:\t%llu kB
//   cpu mem:\t%llu kB
//   <ip><n>:\t%d.%d%%            per engine ring, e.g. "gfx0:\t12.5%"
//
// "drm/amdgpu: Convert to common fdinfo format" (Tvrtko Ursulin, Christian König; amd-gfx,
// 2022-05-10; Linux 5.19) replaced it with drm-driver, drm-pdev, drm-memory-<region> in KiB (the
// same three numbers) and drm-engine-* in ns. The percentages are not read: that commit calls
// them "completely nonsense", each measured over its own time slice, and the fraction was
// printed with %d ("12.5%" is 12.05% or 12.50%).
#pragma once

#include <optional>
#include <string_view>

#include "drm/fdinfo_record.hpp"

namespace gpureap::drm {

// Collects the lines of one fdinfo file that belong to the old format, then makes them the
// record the new format would give: driver "amdgpu", pdev, pasid, regions "vram", "gtt" and
// "cpu" with `total` in bytes (total_from_memory_key set, as for drm-memory-<region>), no
// client id and no engines.
class AmdgpuLegacyFdinfo {
 public:
  // One "key:value" line; `key` may hold a blank ("vram mem"). Other keys are ignored.
  void line(std::string_view key, std::string_view value);

  // The record, or nullopt unless the lines had a valid pdev and at least one valid memory
  // line: without both they are not this format (a drm- file's pasid alone is not).
  std::optional<DrmFdinfo> record() const;

 private:
  DrmFdinfo out_;
  bool memory_seen_ = false;
};

}  // namespace gpureap::drm
