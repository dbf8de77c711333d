#include "proc/pinned_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "proc/proc_parse.hpp"
#include "proc/unix_sockets.hpp"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace gpureap::procfs {

std::optional<PinnedProcess> PinnedProcess::pin(const std::string& proc_root, pid_t pid,
                                                std::uint64_t start_time_ticks, std::string& why) {
  PinnedProcess pinned;
  pinned.pid_ = pid;
  pinned.start_ticks_ = start_time_ticks;
  pinned.pidfd_ = unique_fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u)));
  if (!pinned.pidfd_) {
    why = errno == ENOSYS ? "this kernel has no pidfd_open (Linux < 5.3)"
                          : fmt::format("PID {} cannot be pinned: {}", pid, std::strerror(errno));
    return std::nullopt;
  }
  pinned.dir_ = open_dir_at(AT_FDCWD, fmt::format("{}/{}", proc_root, pid).c_str(), true);
  if (!pinned.dir_) {
    why = fmt::format("PID {} has exited", pid);
    return std::nullopt;
  }
  ReadBuffer buffer(1024);
  const auto text = buffer.read_proc_file_at(pinned.dir_.get(), "stat");
  const auto stat = text ? parse_stat(*text) : std::nullopt;
  if (!stat || stat->start_time_ticks != start_time_ticks) {
    why = stat ? fmt::format("PID {} now names another process (it started at another time)", pid)
               : fmt::format("PID {} has exited", pid);
    return std::nullopt;
  }
  if (!pinned.still_there()) {
    why = fmt::format("PID {} has exited", pid);
    return std::nullopt;
  }
  return pinned;
}

std::optional<PinnedProcess> PinnedProcess::adopt(const std::string& proc_root, pid_t pid, unique_fd pidfd,
                                                  std::string& why) {
  PinnedProcess pinned;
  pinned.pid_ = pid;
  pinned.pidfd_ = std::move(pidfd);
  pinned.dir_ = open_dir_at(AT_FDCWD, fmt::format("{}/{}", proc_root, pid).c_str(), true);
  pollfd exited{pinned.pidfd_.get(), POLLIN, 0};
  if (!pinned.pidfd_ || !pinned.dir_ || ::poll(&exited, 1, 0) != 0) {
    why = fmt::format("PID {} has exited", pid);
    return std::nullopt;
  }
  // The pidfd's process ran when the directory was opened: the directory is its.
  ReadBuffer buffer(1024);
  const auto text = buffer.read_proc_file_at(pinned.dir_.get(), "stat");
  const auto stat = text ? parse_stat(*text) : std::nullopt;
  if (!stat || !pinned.still_there_since(stat->start_time_ticks)) {
    why = fmt::format("PID {} has exited", pid);
    return std::nullopt;
  }
  return pinned;
}

bool PinnedProcess::still_there_since(std::uint64_t start_time_ticks) {
  start_ticks_ = start_time_ticks;
  return still_there();
}

FdProbe PinnedProcess::device_files(std::string_view dev_dir, std::vector<DeviceFileHandle>& held) const {
  held.clear();
  const unique_fd fd_dir = open_dir_at(dir_.get(), "fd", true);
  if (!fd_dir) return errno_means_denied() ? FdProbe::Denied : FdProbe::Gone;
  DeviceFdProbe probe(dev_dir, /*is_procfs=*/true);
  const FdProbe seen = probe.probe_fd_dir(fd_dir.get(), held);
  if (!still_there()) {
    held.clear();
    return FdProbe::Gone;
  }
  return seen;
}

bool PinnedProcess::still_there() const {
  pollfd exited{pidfd_.get(), POLLIN, 0};
  if (::poll(&exited, 1, 0) != 0) return false;  // readable once it has exited (a zombie too)
  // The directory of a reaped process answers ESRCH: checked on a file that is cheap to read.
  ReadBuffer buffer(1024);
  const auto text = buffer.read_proc_file_at(dir_.get(), "stat");
  const auto stat = text ? parse_stat(*text) : std::nullopt;
  return stat && stat->start_time_ticks == start_ticks_ && stat->state != 'Z';
}

std::optional<StatusFields> PinnedProcess::status() const {
  ReadBuffer buffer;
  const auto text = buffer.read_proc_file_at(dir_.get(), "status");
  auto fields = text ? parse_status(*text) : std::nullopt;
  if (!fields || !still_there()) return std::nullopt;
  return fields;
}

std::set<std::uint64_t> PinnedProcess::socket_inodes() const {
  const unique_fd fd_dir = open_dir_at(dir_.get(), "fd", true);
  if (!fd_dir) return {};
  auto inodes = socket_inodes_in(fd_dir.get());
  if (!still_there()) return {};
  return inodes;
}

unique_fd PinnedProcess::open_executable() const {
  unique_fd exe(::openat(dir_.get(), "exe", O_RDONLY | O_CLOEXEC));
  if (!exe || !still_there()) return unique_fd();
  return exe;
}

unique_fd PinnedProcess::open_root() const {
  unique_fd root = open_dir_at(dir_.get(), "root", false);
  if (!root || !still_there()) return unique_fd();
  return root;
}

}  // namespace gpureap::procfs
