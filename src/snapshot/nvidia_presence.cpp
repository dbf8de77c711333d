#include "snapshot/nvidia_presence.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

namespace gpureap {
namespace {

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// The first line of a small sysfs file, "" when it cannot be read.
std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (in) std::getline(in, line);
  return line.substr(0, 64);
}

bool gpu_node_name(std::string_view name) {
  constexpr std::string_view kPrefix = "nvidia";
  if (!name.starts_with(kPrefix) || name.size() == kPrefix.size() || name.size() > kPrefix.size() + 4) return false;
  name.remove_prefix(kPrefix.size());
  return std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string nvidia_hardware_evidence(const std::string& dev_dir, const std::string& sysfs_root,
                                     const std::string& proc_root) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dev_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (gpu_node_name(name)) return "the GPU device node " + it->path().string();
  }
  // Display controllers only (class 0x03xxxx): NVIDIA's audio and USB functions sit beside them.
  const std::string pci = sysfs_root + "/bus/pci/devices";
  for (std::filesystem::directory_iterator it(pci, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string dir = it->path().string();
    if (first_line(dir + "/vendor") == "0x10de" && first_line(dir + "/class").starts_with("0x03")) {
      return "the PCI device " + it->path().filename().string() + " (vendor 0x10de, NVIDIA)";
    }
  }
  if (exists(sysfs_root + "/module/nvidia")) return "the nvidia kernel module (" + sysfs_root + "/module/nvidia)";
  if (exists(proc_root + "/driver/nvidia")) return "the nvidia kernel module (" + proc_root + "/driver/nvidia)";
  return {};
}

}  // namespace gpureap
