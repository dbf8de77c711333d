#include "snapshot/nvidia_presence.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <string_view>

#include "proc/proc_io.hpp"

namespace gpureap {
namespace {

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// The first line of a small sysfs attribute relative to dirfd, "" when it cannot be read. An
// attribute is generated in one piece, as procfs's files are: one read returns it whole.
std::string_view first_line(int dirfd, const std::string& name, procfs::ReadBuffer& buffer) {
  const auto text = buffer.read_proc_file_at(dirfd, name.c_str(), 64);
  if (!text) return {};
  return text->substr(0, text->find('\n'));
}

bool gpu_node_name(std::string_view name) {
  constexpr std::string_view kPrefix = "nvidia";
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size() || name.size() > kPrefix.size() + 4) return false;
  name.remove_prefix(kPrefix.size());
  return std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string joined(const std::string& dir, std::string_view name) {
  return dir + (dir.ends_with('/') ? "" : "/") + std::string(name);
}

}  // namespace

// Read as the /proc scan reads: one directory fd, getdents64 into a reused buffer, each file
// opened relative to it (ps pays for this on every host without NVIDIA's library).
std::string nvidia_hardware_evidence(const std::string& dev_dir, const std::string& sysfs_root,
                                     const std::string& proc_root) {
  procfs::DirLister lister;
  std::string found;
  if (const procfs::unique_fd dev = procfs::open_dir_at(AT_FDCWD, dev_dir.c_str(), false)) {
    lister.for_each(dev.get(), [&](const char* name, unsigned char) {
      if (gpu_node_name(name)) found = name;
      return found.empty();
    });
  }
  if (!found.empty()) return "the GPU device node " + joined(dev_dir, found);
  // Display controllers only (class 0x03xxxx): NVIDIA's audio and USB functions sit beside them.
  const std::string pci = sysfs_root + "/bus/pci/devices";
  if (const procfs::unique_fd devices = procfs::open_dir_at(AT_FDCWD, pci.c_str(), false)) {
    procfs::ReadBuffer buffer(128);
    lister.for_each(devices.get(), [&](const char* name, unsigned char) {
      const std::string device(name);
      if (first_line(devices.get(), device + "/vendor", buffer) == "0x10de" &&
          first_line(devices.get(), device + "/class", buffer).starts_with("0x03")) {
        found = device;
      }
      return found.empty();
    });
  }
  if (!found.empty()) return "the PCI device " + found + " (vendor 0x10de, NVIDIA)";
  if (exists(sysfs_root + "/module/nvidia")) return "the nvidia kernel module (" + sysfs_root + "/module/nvidia)";
  if (exists(proc_root + "/driver/nvidia")) return "the nvidia kernel module (" + proc_root + "/driver/nvidia)";
  return {};
}

}  // namespace gpureap
