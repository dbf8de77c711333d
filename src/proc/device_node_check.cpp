#include "proc/device_node_check.hpp"

#include <fcntl.h>

namespace gpureap::procfs {

bool DeviceNodeCheck::is_that_node(int fd_dir, const char* name, const std::string& path) {
  struct stat open_file {};
  if (::fstatat(fd_dir, name, &open_file, 0) != 0) return false;  // closed since, or not ours to see
  const std::optional<struct stat>& seen = node_at(path);
  if (!seen) return S_ISCHR(open_file.st_mode);
  const struct stat& node = *seen;
  if (S_ISCHR(open_file.st_mode) && S_ISCHR(node.st_mode)) return open_file.st_rdev == node.st_rdev;
  return open_file.st_dev == node.st_dev && open_file.st_ino == node.st_ino;
}

const std::optional<struct stat>& DeviceNodeCheck::node_at(const std::string& path) {
  auto cached = node_stats_.find(path);
  if (cached == node_stats_.end()) {
    struct stat node {};
    std::optional<struct stat> seen;
    if (::stat(path.c_str(), &node) == 0) seen = node;
    cached = node_stats_.emplace(path, seen).first;
  }
  return cached->second;
}

}  // namespace gpureap::procfs
