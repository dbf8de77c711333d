#include "proc/process_info.hpp"

#include <algorithm>

namespace gpureap {

std::string ProcessInfo::command() const {
  if (cmdline.empty()) return "[" + comm + "]";
  std::size_t length = 0;
  for (const std::string& arg : cmdline) length += arg.size() + 1;
  std::string joined;
  joined.reserve(length);
  for (const std::string& arg : cmdline) {
    if (!joined.empty()) joined.push_back(' ');
    joined += arg;
  }
  return joined;
}

bool ProcessInfo::holds_gpu_minor(int minor) const {
  return std::any_of(device_files.begin(), device_files.end(), [minor](const DeviceFileHandle& h) {
    return h.kind == DeviceFileKind::Gpu && h.minor == minor;
  });
}

std::string executable_basename(const std::string& exe) {
  std::string base = exe;
  if (const auto slash = base.rfind('/'); slash != std::string::npos) base = base.substr(slash + 1);
  // readlink of a deleted binary ends in " (deleted)".
  if (const auto deleted = base.find(" (deleted)"); deleted != std::string::npos) base.resize(deleted);
  return base;
}

}  // namespace gpureap
