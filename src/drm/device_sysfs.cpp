#include "drm/device_sysfs.hpp"

#include <algorithm>
#include <fcntl.h>

#include "drm/fdinfo_quantity.hpp"
#include "drm/fdinfo_record.hpp"
#include "drm/text_scan.hpp"
#include "proc/proc_io.hpp"

namespace gpureap::drm {
namespace {

constexpr std::size_t kSysfsFileMax = 4096;

bool all_digits(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string_view gpu_vendor_name(GpuVendor vendor) {
  switch (vendor) {
    case GpuVendor::Amd: return "amd";
    case GpuVendor::Intel: return "intel";
    case GpuVendor::Nvidia: return "nvidia";
    case GpuVendor::Other: break;
  }
  return "other";
}

GpuVendor vendor_from_pci_id(std::uint16_t vendor_id) {
  switch (vendor_id) {
    case 0x1002: return GpuVendor::Amd;
    case 0x8086: return GpuVendor::Intel;
    case 0x10de: return GpuVendor::Nvidia;
    default: return GpuVendor::Other;
  }
}

const DrmNode* DrmDevice::node(NodeKind kind) const {
  for (const auto& n : nodes) {
    if (n.kind == kind) return &n;
  }
  return nullptr;
}

bool DrmDevice::has_minor(unsigned minor) const {
  return std::any_of(nodes.begin(), nodes.end(), [minor](const DrmNode& n) { return n.minor == minor; });
}

UeventFields parse_uevent(std::string_view text) {
  UeventFields out;
  text = text.substr(0, kSysfsFileMax);
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (line.substr(0, 7) == "DRIVER=") {
      const auto name = line.substr(7);
      if (!name.empty() && name.size() <= kMaxNameLength &&
          std::all_of(name.begin(), name.end(), [](char c) { return c > ' ' && c < 0x7f; })) {
        out.driver.assign(name);
      }
    } else if (line.substr(0, 14) == "PCI_SLOT_NAME=") {
      if (auto address = canonical_pci_address(line.substr(14))) out.pci_slot = std::move(*address);
    }
  }
  return out;
}

std::optional<std::uint16_t> parse_pci_id(std::string_view text) {
  text = first_line(text);
  if (text.size() != 6 || text.substr(0, 2) != "0x") return std::nullopt;
  unsigned value = 0;
  for (const char c : text.substr(2)) {
    unsigned digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<unsigned>(c - 'A' + 10);
    } else {
      return std::nullopt;
    }
    value = value * 16 + digit;
  }
  return static_cast<std::uint16_t>(value);
}

std::optional<std::pair<unsigned, unsigned>> parse_dev_numbers(std::string_view text) {
  text = first_line(text);
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  const auto major = parse_plain_count(text.substr(0, colon));
  const auto minor = parse_plain_count(text.substr(colon + 1));
  if (!major || !minor || *major > 0xfff || *minor > 0xfffff) return std::nullopt;
  return std::pair{static_cast<unsigned>(*major), static_cast<unsigned>(*minor)};
}

std::optional<std::uint64_t> parse_sysfs_number(std::string_view text) {
  return parse_plain_count(first_line(text));
}

std::optional<NodeKind> drm_node_kind(std::string_view name) {
  if (name.substr(0, 7) == "renderD" && all_digits(name.substr(7))) return NodeKind::Render;
  if (name.substr(0, 4) == "card" && all_digits(name.substr(4))) return NodeKind::Card;
  return std::nullopt;
}

std::vector<const DrmDevice*> reset_domain_of(const std::vector<DrmDevice>& devices, const DrmDevice& device) {
  std::vector<const DrmDevice*> domain;
  for (const auto& other : devices) {
    const bool same_hive = device.xgmi_hive_id && *device.xgmi_hive_id != 0 && other.xgmi_hive_id == device.xgmi_hive_id;
    if (&other == &device || other.pci_address == device.pci_address || same_hive) domain.push_back(&other);
  }
  return domain;
}

std::vector<DrmDevice> read_drm_devices(const std::string& sysfs_root) {
  std::vector<DrmDevice> devices;
  const std::string class_path = sysfs_root + "/class/drm";
  const procfs::unique_fd dir = procfs::open_dir_at(AT_FDCWD, class_path.c_str(), /*no_follow=*/false);
  if (!dir) return devices;
  std::vector<std::string> names;
  procfs::DirLister lister;
  lister.for_each(dir.get(), [&](const char* name, unsigned char) {
    if (drm_node_kind(name) && names.size() < 1024) names.emplace_back(name);
    return true;
  });
  std::sort(names.begin(), names.end());
  procfs::ReadBuffer buffer(kSysfsFileMax);
  for (const auto& name : names) {
    const auto kind = drm_node_kind(name);
    const auto dev = buffer.read_file_at(dir.get(), (name + "/dev").c_str(), kSysfsFileMax);
    const auto numbers = dev ? parse_dev_numbers(*dev) : std::nullopt;
    if (!numbers || numbers->first != kDrmCharMajor) continue;
    const auto uevent = buffer.read_file_at(dir.get(), (name + "/device/uevent").c_str(), kSysfsFileMax);
    if (!uevent) continue;
    UeventFields fields = parse_uevent(*uevent);
    if (fields.pci_slot.empty()) continue;
    auto found = std::find_if(devices.begin(), devices.end(),
                              [&](const DrmDevice& d) { return d.pci_address == fields.pci_slot; });
    if (found == devices.end()) {
      DrmDevice device;
      device.pci_address = fields.pci_slot;
      device.driver = std::move(fields.driver);
      if (const auto vendor = buffer.read_file_at(dir.get(), (name + "/device/vendor").c_str(), kSysfsFileMax)) {
        if (const auto id = parse_pci_id(*vendor)) {
          device.vendor_id = *id;
          device.vendor = vendor_from_pci_id(*id);
        }
      }
      if (const auto total = buffer.read_file_at(dir.get(), (name + "/device/mem_info_vram_total").c_str(), kSysfsFileMax)) {
        device.vram_total = parse_sysfs_number(*total);
      }
      if (const auto used = buffer.read_file_at(dir.get(), (name + "/device/mem_info_vram_used").c_str(), kSysfsFileMax)) {
        device.vram_used = parse_sysfs_number(*used);
      }
      if (const auto hive = buffer.read_file_at(dir.get(), (name + "/device/xgmi_hive_info/xgmi_hive_id").c_str(), kSysfsFileMax)) {
        device.xgmi_hive_id = parse_sysfs_number(*hive);
      }
      if (const auto id = buffer.read_file_at(dir.get(), (name + "/device/xgmi_device_id").c_str(), kSysfsFileMax)) {
        device.xgmi_device_id = parse_sysfs_number(*id);
      }
      devices.push_back(std::move(device));
      found = devices.end() - 1;
    }
    found->nodes.push_back(DrmNode{name, *kind, numbers->second});
  }
  std::sort(devices.begin(), devices.end(),
            [](const DrmDevice& a, const DrmDevice& b) { return a.pci_address < b.pci_address; });
  return devices;
}

}  // namespace gpureap::drm
