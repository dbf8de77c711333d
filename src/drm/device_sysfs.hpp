// The DRM devices of a host from <sysfs>/class/drm: each GPU by PCI address with its driver,
// vendor, device nodes (cardN for display and modesetting, renderDN for rendering and compute)
// and, where the driver exposes them (amdgpu's mem_info_vram_*), its VRAM total and use.
// Everything is read relative to a sysfs root that tests point at a tree of their own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpureap::drm {

inline constexpr unsigned kDrmCharMajor = 226;

enum class GpuVendor { Amd, Intel, Nvidia, Other };
// "amd", "intel", "nvidia", "other" (JSON and tables).
std::string_view gpu_vendor_name(GpuVendor vendor);
GpuVendor vendor_from_pci_id(std::uint16_t vendor_id);

enum class NodeKind { Card, Render };

struct DrmNode {
  std::string name;  // "card0", "renderD128"
  NodeKind kind = NodeKind::Card;
  unsigned minor = 0;  // from <node>/dev ("226:128")
};

struct DrmDevice {
  std::string pci_address;  // "0000:03:00.0"
  std::string driver;       // DRIVER= of the device's uevent: "amdgpu", "i915", "xe"
  std::uint16_t vendor_id = 0;
  GpuVendor vendor = GpuVendor::Other;
  std::vector<DrmNode> nodes;  // by name
  std::optional<std::uint64_t> vram_total;  // bytes, mem_info_vram_total (amdgpu)
  std::optional<std::uint64_t> vram_used;   // bytes, mem_info_vram_used (amdgpu)
  // amdgpu's XGMI hive (drivers/gpu/drm/amd/amdgpu/amdgpu_xgmi.c): <device>/xgmi_hive_info/
  // xgmi_hive_id and <device>/xgmi_device_id, both "%llu\n"; absent for a GPU in no hive. A reset
  // of one GPU of a hive resets them all (amdgpu recovers a hive together).
  std::optional<std::uint64_t> xgmi_hive_id;
  std::optional<std::uint64_t> xgmi_device_id;

  const DrmNode* node(NodeKind kind) const;
  bool has_minor(unsigned minor) const;
};

struct UeventFields {
  std::string driver;
  std::string pci_slot;  // canonical PCI address, empty when absent or malformed
};
// A device's uevent ("DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n...").
UeventFields parse_uevent(std::string_view text);
// "0x1002\n" -> 0x1002.
std::optional<std::uint16_t> parse_pci_id(std::string_view text);
// "226:128\n" -> {226, 128}.
std::optional<std::pair<unsigned, unsigned>> parse_dev_numbers(std::string_view text);
// A decimal sysfs number ("17163091968\n").
std::optional<std::uint64_t> parse_sysfs_number(std::string_view text);
// "card0" -> Card, "renderD128" -> Render; connectors ("card0-DP-1") and others -> nullopt.
std::optional<NodeKind> drm_node_kind(std::string_view name);

// The devices of `devices` that a reset of `device` resets with it: the GPUs of its XGMI hive
// (itself included), or itself alone when it is in none. By PCI address.
std::vector<const DrmDevice*> reset_domain_of(const std::vector<DrmDevice>& devices, const DrmDevice& device);

// The DRM devices under <sysfs_root>/class/drm, ordered by PCI address. Nodes whose device is
// not a PCI device (no PCI_SLOT_NAME: virtual and platform GPUs) are left out. Empty when the
// directory is missing or unreadable.
std::vector<DrmDevice> read_drm_devices(const std::string& sysfs_root);

}  // namespace gpureap::drm
