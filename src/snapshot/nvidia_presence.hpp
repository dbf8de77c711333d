// Whether a host has NVIDIA GPUs, known without NVIDIA's library: a host with only AMD or Intel
// GPUs has no libnvidia-ml, and that is normal there, not a fault.
#pragma once

#include <string>

namespace gpureap {

// What shows NVIDIA GPUs here, in words, or "" when nothing does: a GPU device node
// (<dev_dir>/nvidia<N>, which the driver makes per GPU), a PCI display controller of vendor
// 0x10de (<sysfs_root>/bus/pci/devices/*/vendor and class), or the nvidia kernel module
// (<sysfs_root>/module/nvidia, <proc_root>/driver/nvidia).
std::string nvidia_hardware_evidence(const std::string& dev_dir, const std::string& sysfs_root,
                                     const std::string& proc_root);

}  // namespace gpureap
