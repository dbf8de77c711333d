// The text a DRM driver prints into /proc/<pid>/fdinfo/<fd> for one client, per driver and
// kernel generation. The formats are the kernel's, not the product's (nothing here includes src/):
//
// - Generic lines, printed by fs/proc/fd.c seq_show() before the driver's: pos, flags, mnt_id,
//   ino. The driver copies them from the real /proc/<pid>/fdinfo/<fd> of the descriptor.
// - DRM core, drivers/gpu/drm/drm_file.c drm_show_fdinfo() (Linux 6.5+): drm-driver,
//   drm-client-id, drm-pdev; then the driver's show_fdinfo. drm_print_memory_stats() prints per
//   region drm-total-, drm-shared- and, when the driver supports them, drm-active-,
//   drm-resident-, drm-purgeable-; print_size() uses the largest of "", " KiB", " MiB" that
//   divides the value exactly. Documentation/gpu/drm-usage-stats.rst defines every key.
// - amdgpu current (amdgpu_fdinfo.c amdgpu_show_fdinfo, 6.12+): pasid; memory stats for the
//   regions vram, gtt, cpu, gds, gws, oa, doorbell, mmioremap (resident and purgeable
//   supported); the legacy aliases drm-memory-vram/gtt/cpu in KiB (note "drm-memory-gtt: \t",
//   a blank before the tab); amd-evicted-vram, amd-requested-vram/gtt; drm-engine-<ip> in ns
//   for each engine with non-zero time.
// - amdgpu legacy, Linux 5.14-5.18 ("drm/amdgpu: Add show_fdinfo() interface", 2021):
//   "pdev:\t%04x:%02x:%02x.%d", "pasid:\t%u", "vram mem:\t%llu kB" (bytes/1024), gtt mem,
//   cpu mem, and "<ip><n>:\t%d.%d%%" per ring with work.
// - i915 (i915_drm_client.c): memory stats per region by uabi name (system0, and local0 on a
//   discrete card), drm-engine-<class> in ns for render, copy, video, video-enhance, and
//   drm-engine-capacity-<class> where a class has more than one engine.
// - xe (xe_drm_client.c show_meminfo/show_run_ticks): memory stats for system, gtt, vram0;
//   per engine class (rcs, bcs, vcs, vecs, ccs) drm-cycles-<class> and drm-total-cycles-<class>
//   (GPU timestamp ticks), and drm-engine-capacity-<class> where more than one.
#pragma once

#include <cstdint>
#include <string>

#include "drm/drm_state.hpp"

namespace gpusim::drm {

// "<n>", "<n> KiB" or "<n> MiB": the largest unit that divides `bytes` exactly (print_size).
std::string drm_size(std::uint64_t bytes);

// The client's engine busy time in ns at `now_ns`: busy_percent of the time since it started.
std::uint64_t busy_ns(const ClientRecord& client, std::int64_t now_ns);

// The fdinfo text of `client` on `device` at `now_ns`, after the generic lines `generic`
// (pos/flags/mnt_id/ino, each ending in '\n').
std::string fdinfo_text(const DrmDevice& device, const ClientRecord& client, std::int64_t now_ns,
                        const std::string& generic);

}  // namespace gpusim::drm
