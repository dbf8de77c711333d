#include "drm/kfd_process.hpp"

#include <algorithm>
#include <cstdio>
#include <fcntl.h>

#include "drm/device_sysfs.hpp"
#include "drm/fdinfo_quantity.hpp"
#include "proc/proc_io.hpp"

namespace gpureap::drm {
namespace {

constexpr std::size_t kSmallFile = 4096;
constexpr std::size_t kMaxEntries = 4096;

}  // namespace

std::optional<std::uint32_t> gpu_id_of_vram_file(std::string_view name) {
  if (name.substr(0, 5) != "vram_") return std::nullopt;
  const auto id = parse_plain_count(name.substr(5));
  if (!id || *id > 0xffffffffu || name.size() > 15) return std::nullopt;
  return static_cast<std::uint32_t>(*id);
}

std::optional<std::string> pci_address_of_kfd_properties(std::string_view text) {
  text = text.substr(0, 64 * 1024);
  std::optional<std::uint64_t> location;
  std::uint64_t domain = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const auto space = line.find(' ');
    if (space == std::string_view::npos) continue;
    const auto key = line.substr(0, space);
    const auto value = parse_plain_count(line.substr(space + 1));
    if (!value) continue;
    if (key == "location_id") location = value;
    if (key == "domain") domain = *value;
  }
  if (!location || *location > 0xffff || domain > 0xffff) return std::nullopt;
  const auto bus = static_cast<unsigned>(*location >> 8);
  const auto device = static_cast<unsigned>((*location >> 3) & 0x1f);
  const auto function = static_cast<unsigned>(*location & 0x7);
  char out[16];
  std::snprintf(out, sizeof out, "%04x:%02x:%02x.%u", static_cast<unsigned>(domain), bus, device, function);
  return std::string(out);
}

std::vector<pid_t> list_kfd_processes(const std::string& sysfs_root) {
  std::vector<pid_t> pids;
  const std::string path = sysfs_root + "/class/kfd/kfd/proc";
  const procfs::unique_fd dir = procfs::open_dir_at(AT_FDCWD, path.c_str(), /*no_follow=*/false);
  if (!dir) return pids;
  procfs::DirLister lister;
  lister.for_each(dir.get(), [&](const char* name, unsigned char) {
    const auto pid = parse_plain_count(name);
    if (pid && *pid > 0 && *pid <= 0x3fffffff && pids.size() < kMaxEntries) pids.push_back(static_cast<pid_t>(*pid));
    return true;
  });
  std::sort(pids.begin(), pids.end());
  return pids;
}

std::optional<KfdProcess> read_kfd_process(const std::string& sysfs_root, pid_t pid) {
  const std::string path = sysfs_root + "/class/kfd/kfd/proc/" + std::to_string(pid);
  const procfs::unique_fd dir = procfs::open_dir_at(AT_FDCWD, path.c_str(), /*no_follow=*/false);
  if (!dir) return std::nullopt;
  KfdProcess process;
  process.pid = pid;
  procfs::ReadBuffer buffer(kSmallFile);
  if (const auto text = buffer.read_file_at(dir.get(), "pasid", kSmallFile)) {
    if (const auto pasid = parse_sysfs_number(*text); pasid && *pasid <= 0xffffffffu) {
      process.pasid = static_cast<std::uint32_t>(*pasid);
    }
  }
  std::vector<std::pair<std::string, std::uint32_t>> files;
  procfs::DirLister lister;
  lister.for_each(dir.get(), [&](const char* name, unsigned char) {
    if (const auto id = gpu_id_of_vram_file(name); id && files.size() < kMaxEntries) files.emplace_back(name, *id);
    return true;
  });
  for (const auto& [name, id] : files) {
    const auto text = buffer.read_file_at(dir.get(), name.c_str(), kSmallFile);
    const auto bytes = text ? parse_sysfs_number(*text) : std::nullopt;
    if (bytes) process.vram.push_back(KfdGpuMemory{id, *bytes});
  }
  std::sort(process.vram.begin(), process.vram.end(),
            [](const KfdGpuMemory& a, const KfdGpuMemory& b) { return a.gpu_id < b.gpu_id; });
  return process;
}

std::vector<KfdNode> read_kfd_topology(const std::string& sysfs_root) {
  std::vector<KfdNode> nodes;
  const std::string path = sysfs_root + "/class/kfd/kfd/topology/nodes";
  const procfs::unique_fd dir = procfs::open_dir_at(AT_FDCWD, path.c_str(), /*no_follow=*/false);
  if (!dir) return nodes;
  std::vector<std::string> names;
  procfs::DirLister lister;
  lister.for_each(dir.get(), [&](const char* name, unsigned char) {
    if (parse_plain_count(name) && names.size() < kMaxEntries) names.emplace_back(name);
    return true;
  });
  procfs::ReadBuffer buffer(kSmallFile);
  for (const auto& name : names) {
    const auto id_text = buffer.read_file_at(dir.get(), (name + "/gpu_id").c_str(), kSmallFile);
    const auto id = id_text ? parse_sysfs_number(*id_text) : std::nullopt;
    if (!id || *id == 0 || *id > 0xffffffffu) continue;
    KfdNode node;
    node.gpu_id = static_cast<std::uint32_t>(*id);
    if (const auto properties = buffer.read_file_at(dir.get(), (name + "/properties").c_str(), 64 * 1024)) {
      node.pci_address = pci_address_of_kfd_properties(*properties).value_or("");
    }
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(), [](const KfdNode& a, const KfdNode& b) { return a.gpu_id < b.gpu_id; });
  return nodes;
}

}  // namespace gpureap::drm
