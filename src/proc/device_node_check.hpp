// Whether a descriptor's open file is the GPU device node its /proc link names. The link is a
// path, and any user can put a file at that path in a mount namespace of its own (a tmpfs or a
// bind mount in an unprivileged user namespace) and hand the descriptor to another process. So
// the open file must be the node itself: for character devices the same device number (a
// container's own /dev has its own nodes of the same devices), otherwise the same inode (the
// simulator's nodes are regular files). A node that is gone here (unlinked while held) leaves a
// character device as the only evidence. And a descriptor opened with O_PATH only names the
// node: the driver never opened it, so it holds no GPU and blocks no reset (any user can make
// one, as runtimes do while they set up a container's devices).
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>
#include <unordered_map>

namespace gpureap::procfs {

class DeviceNodeCheck {
 public:
  // `name` is the descriptor's entry in the open fd/ directory `fd_dir`; `path` its link target.
  bool is_that_node(int fd_dir, const char* name, const std::string& path);
  // is_that_node, and the descriptor has the node open (not O_PATH): what a full fd/ listing
  // takes for a GPU file. A kept descriptor's later checks need only is_that_node: one that
  // the process swapped for an O_PATH one of the same node misleads only about itself.
  bool holds_that_node(int fd_dir, const char* name, const std::string& path);
  // Whether the node at `path` is here to compare with: then is_that_node proves a descriptor
  // by its open file alone, whatever its link says now.
  bool has_node(const std::string& path) { return node_at(path).has_value(); }

 private:
  const std::optional<struct stat>& node_at(const std::string& path);
  static bool names_only(int fd_dir, const char* name);
  std::unordered_map<std::string, std::optional<struct stat>> node_stats_;  // by path, read once
};

}  // namespace gpureap::procfs
