#include "proc/device_fd_probe.hpp"

#include <charconv>

#include "proc/proc_parse.hpp"

namespace gpureap::procfs {

DeviceFdProbe::DeviceFdProbe(std::string_view dev_dir, bool is_procfs)
    : dev_dir_(dev_dir), is_procfs_(is_procfs), buffer_(512) {}

FdProbe DeviceFdProbe::probe(int root_fd, pid_t pid, std::vector<DeviceFileHandle>& held) {
  held.clear();
  char path[24];
  const auto end = std::to_chars(path, path + 16, pid).ptr;
  std::string_view("/fd").copy(end, 3);
  end[3] = '\0';
  const unique_fd fd_dir = open_dir_at(root_fd, path, /*no_follow=*/false);
  if (!fd_dir) return errno_means_denied() ? FdProbe::Denied : FdProbe::Gone;
  const FdProbe seen = probe_fd_dir(fd_dir.get(), held);
  if (seen != FdProbe::NoFiles || !is_procfs_) return seen;
  // An exiting task drops its files, then its fs_struct (do_exit: exit_files, exit_fs); procfs
  // answers its cwd while it has one (proc_cwd_link). A kernel thread keeps init's. So an
  // empty table beside a cwd is no zombie whose live threads hold the files: one readlink
  // instead of reading its stat.
  std::string_view("/cwd").copy(end, 4);
  end[4] = '\0';
  return buffer_.read_link_at(root_fd, path) ? FdProbe::EmptyAlive : FdProbe::NoFiles;
}

FdProbe DeviceFdProbe::probe_fd_dir(int fd_dir_fd, std::vector<DeviceFileHandle>& held) {
  held.clear();
  FdProbe result = FdProbe::NoFiles;
  bool complete = true;  // every link of a holder read
  const bool listed = lister_.for_each(
      fd_dir_fd,
      [&](const char* name, unsigned char) {
        const auto target = buffer_.read_link_at(fd_dir_fd, name);
        if (!target) {
          if (!errno_means_denied()) return true;  // closed since the listing
          if (result == FdProbe::DeviceFile) {
            complete = false;
          } else {
            result = FdProbe::Denied;
          }
          return false;
        }
        auto handle = classify_fd_link(name, *target, dev_dir_);
        if (handle && is_procfs_ && !nodes_.holds_that_node(fd_dir_fd, name, handle->path)) handle.reset();
        if (handle) {
          held.push_back(std::move(*handle));
          result = FdProbe::DeviceFile;
        } else if (result != FdProbe::DeviceFile) {
          result = FdProbe::OtherFiles;
        }
        return true;
      },
      is_procfs_);
  if (result == FdProbe::DeviceFile) {
    if (!listed || !complete) held.clear();  // the reader lists them itself
    return result;
  }
  if (!listed) return errno_means_denied() ? FdProbe::Denied : FdProbe::Gone;
  return result;
}

}  // namespace gpureap::procfs
