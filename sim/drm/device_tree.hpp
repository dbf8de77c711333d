// `gpusim drm-add`: a DRM GPU as the kernel lays it out in sysfs, its device nodes, and its
// record in drm/devices.json (docs/simulator.md, "AMD and Intel GPUs").
//
// sysfs, as drivers/gpu/drm/drm_sysfs.c and the PCI core show it:
//   devices/<pci>/{uevent (DRIVER=, PCI_ID=, PCI_SLOT_NAME=), vendor, device}
//   devices/<pci>/drm/<node>/{dev "226:<minor>", uevent, device -> ../..}
//   class/drm/<node> -> ../../devices/<pci>/drm/<node>
//   amdgpu only: devices/<pci>/mem_info_vram_total, mem_info_vram_used (amdgpu_device.c;
//   i915 and xe have no such files)
//   amdgpu with an XGMI hive (amdgpu_xgmi.c amdgpu_xgmi_sysfs_add_dev_info): xgmi_device_id,
//   xgmi_physical_id, and xgmi_hive_info: a directory under the hive's first device holding
//   xgmi_hive_id ("%llu") and node<N> links to each member, a link to that directory on others.
//   with KFD (kfd_topology.c): class/kfd/kfd/topology/nodes/<n>/{gpu_id, name, properties}
//   (node 0 is the CPU), generation_id and system_properties beside them.
#pragma once

#include "common/result.hpp"
#include "drm/drm_state.hpp"

namespace gpusim::drm {

// Validates `device` against those already added (PCI address, nodes), lays it out and records
// it. Fills device.gpu_id when device.kfd.
Status add_device(const DrmLayout& layout, DrmDevice device);

// Writes `text` to `path` (replacing it atomically) only when it differs; true when written.
bool write_if_changed(const std::string& path, const std::string& text, unsigned mode = 0444);

}  // namespace gpusim::drm
