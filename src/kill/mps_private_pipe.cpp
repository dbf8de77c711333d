#include "kill/mps_private_pipe.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace gpureap {
namespace {

// The front end's sockets: `control` (every user's) and `control_privileged` (root's front end).
constexpr const char* kSocketNames[] = {"control", "control_privileged"};

// A directory nobody but root can change the entries of.
bool only_root_changes(int fd) {
  struct stat info {};
  return ::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode) && info.st_uid == 0 &&
         ((info.st_mode & (S_IWGRP | S_IWOTH)) == 0 || (info.st_mode & S_ISVTX) != 0);
}

std::string random_name() {
  unsigned char bytes[8] = {};
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) return {};
  std::string name = ".gpureap-mps-";
  for (const unsigned char b : bytes) name += fmt::format("{:02x}", b);
  return name;
}

// Down from the root, each directory opened without following a link and checked: the
// parent, opened only when nobody but root can change any directory on the way.
procfs::unique_fd open_root_owned(const std::string& root_here, const std::string& parent_path, std::string& why) {
  procfs::unique_fd at(::open(root_here.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  std::string walked = "/";
  std::size_t start = 1;
  while (at) {
    if (!only_root_changes(at.get())) {
      why = fmt::format("{} can be changed by users other than root: the MPS front end is not pointed below it", walked);
      return {};
    }
    if (start > parent_path.size()) break;
    std::size_t end = parent_path.find('/', start);
    if (end == std::string::npos) end = parent_path.size();
    const std::string component = parent_path.substr(start, end - start);
    start = end + 1;
    if (component.empty()) continue;
    at = procfs::unique_fd(::openat(at.get(), component.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    walked = parent_path.substr(0, end);
  }
  if (!at) {
    why = fmt::format("{} cannot be opened as a directory (without following a link): {}", walked, std::strerror(errno));
  }
  return at;
}

// A new directory of a random name under `parent`, mode 0700, opened without following a
// link; `name` is set to each name tried.
procfs::unique_fd make_private_dir(int parent, const std::string& parent_path, std::string& name, std::string& why) {
  procfs::unique_fd dir;
  for (int attempt = 0; attempt < 8 && !dir; ++attempt) {
    name = random_name();
    if (name.empty() || ::mkdirat(parent, name.c_str(), 0700) != 0) {
      if (errno == EEXIST) continue;
      why = fmt::format("cannot make a directory in {}: {}", parent_path, std::strerror(errno));
      return {};
    }
    dir = procfs::unique_fd(::openat(parent, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  }
  if (!dir) why = fmt::format("cannot make a directory in {}", parent_path);
  return dir;
}

// The daemon's socket listening at `path`, if it has one.
const procfs::UnixSocket* daemon_listening_at(const std::set<std::uint64_t>& daemon_sockets,
                                              const procfs::UnixSocketTable& table, const std::string& path) {
  const procfs::UnixSocket* listening = nullptr;
  for (const std::uint64_t ino : daemon_sockets) {
    const auto it = table.find(ino);
    if (it != table.end() && it->second.listening && it->second.bound_path == path) listening = &it->second;
  }
  return listening;
}

// Links each of the daemon's listening sockets into `dir` (each link noted in `links` as made,
// for removal), and checks that what was linked is that socket.
bool link_daemon_sockets(int pipe, int dir, const std::string& bound_dir, const std::set<std::uint64_t>& daemon_sockets,
                         const procfs::UnixSocketTable& table, std::set<std::string>& links, std::string& why) {
  for (const char* name : kSocketNames) {
    const procfs::UnixSocket* listening = daemon_listening_at(daemon_sockets, table, bound_dir + "/" + name);
    if (listening == nullptr) continue;
    if (::linkat(pipe, name, dir, name, 0) != 0) {
      why = fmt::format("cannot link {}/{}: {}", bound_dir, name, std::strerror(errno));
      return false;
    }
    links.insert(name);
    // What was linked may have been swapped in meanwhile: it must be the daemon's own socket.
    struct stat linked {};
    if (::fstatat(dir, name, &linked, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(linked.st_mode) ||
        linked.st_dev != listening->file_dev || linked.st_ino != listening->file_ino) {
      why = fmt::format("{}/{} is no longer the control daemon's socket", bound_dir, name);
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<PrivatePipeDirectory> PrivatePipeDirectory::make(const std::string& root_here, const std::string& bound_dir,
                                                               const std::set<std::uint64_t>& daemon_sockets,
                                                               const procfs::UnixSocketTable& table, std::string& why) {
  const auto slash = bound_dir.rfind('/');
  if (bound_dir.empty() || bound_dir.front() != '/' || slash == std::string::npos || slash + 1 >= bound_dir.size()) {
    why = fmt::format("the MPS pipe directory {} is not an absolute path below /", bound_dir);
    return std::nullopt;
  }
  const std::string parent_path = bound_dir.substr(0, slash);
  const std::string pipe_name = bound_dir.substr(slash + 1);
  procfs::unique_fd at = open_root_owned(root_here, parent_path, why);
  if (!at) return std::nullopt;
  const procfs::unique_fd pipe(::openat(at.get(), pipe_name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!pipe) {
    why = fmt::format("the MPS pipe directory {} cannot be opened: {}", bound_dir, std::strerror(errno));
    return std::nullopt;
  }
  PrivatePipeDirectory made;
  made.dir_ = make_private_dir(at.get(), parent_path, made.name_, why);
  if (!made.dir_) return std::nullopt;
  made.parent_ = std::move(at);
  const std::string here_parent = root_here == "/" ? parent_path : root_here + parent_path;
  made.path_ = (here_parent.empty() ? std::string() : here_parent) + "/" + made.name_;
  if (!link_daemon_sockets(pipe.get(), made.dir_.get(), bound_dir, daemon_sockets, table, made.links_, why)) {
    return std::nullopt;
  }
  if (made.links_.count("control") == 0) {
    why = fmt::format("the control daemon listens at no {}/control", bound_dir);
    return std::nullopt;
  }
  return made;
}

PrivatePipeDirectory::PrivatePipeDirectory(PrivatePipeDirectory&& other) noexcept
    : parent_(std::move(other.parent_)),
      dir_(std::move(other.dir_)),
      name_(std::move(other.name_)),
      path_(std::move(other.path_)),
      links_(std::move(other.links_)) {}

// The other takes ours, and removes it when it goes.
PrivatePipeDirectory& PrivatePipeDirectory::operator=(PrivatePipeDirectory&& other) noexcept {
  std::swap(parent_, other.parent_);
  std::swap(dir_, other.dir_);
  std::swap(name_, other.name_);
  std::swap(path_, other.path_);
  std::swap(links_, other.links_);
  return *this;
}

PrivatePipeDirectory::~PrivatePipeDirectory() {
  if (!dir_ || !parent_) return;
  for (const auto& name : links_) ::unlinkat(dir_.get(), name.c_str(), 0);
  ::unlinkat(parent_.get(), name_.c_str(), AT_REMOVEDIR);
}

}  // namespace gpureap
