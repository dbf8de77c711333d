#include "proc/device_node_check.hpp"

#include <fcntl.h>

#include "proc/proc_io.hpp"
#include "proc/proc_parse.hpp"

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

bool DeviceNodeCheck::holds_that_node(int fd_dir, const char* name, const std::string& path) {
  return is_that_node(fd_dir, name, path) && !names_only(fd_dir, name);
}

// The link's mode is the descriptor's access (proc_fd_link: S_IRUSR for FMODE_READ, S_IWUSR for
// FMODE_WRITE). Neither is an O_PATH descriptor, or an open with access mode 3 (ioctl only),
// which does open the device: fdinfo's flags tell them apart.
bool DeviceNodeCheck::names_only(int fd_dir, const char* name) {
  struct stat link {};
  if (::fstatat(fd_dir, name, &link, AT_SYMLINK_NOFOLLOW) != 0) return false;  // closed since: the next look sees
  if ((link.st_mode & (S_IRUSR | S_IWUSR)) != 0) return false;
  const std::string fdinfo = std::string("../fdinfo/") + name;
  ReadBuffer buffer(256);
  const auto text = buffer.read_file_at(fd_dir, fdinfo.c_str(), 4096);
  const auto flags = text ? parse_fdinfo_flags(*text) : std::nullopt;
  return flags && (*flags & O_PATH) != 0;
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
