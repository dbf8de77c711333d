#include "job/job_cgroup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string_view>

#include <fmt/format.h>

#include "kill/cgroup_kill.hpp"
#include "proc/pid_files.hpp"

namespace gpureap::job {
namespace {

// Sub-cgroups the job made, deepest first, so that each rmdir finds its directory empty.
void remove_tree(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    std::vector<std::string> children;
    while (dirent* entry = readdir(d)) {
      if (entry->d_type == DT_DIR && std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) {
        children.push_back(dir + "/" + entry->d_name);
      }
    }
    closedir(d);
    for (const auto& child : children) remove_tree(child);
  }
  rmdir(dir.c_str());
}

bool ends_with(const std::string& text, std::string_view suffix) {
  return text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool names_a_unit(const std::string& name) {
  return ends_with(name, ".slice") || ends_with(name, ".scope") || ends_with(name, ".service");
}

// systemd's boolean values, as its parse_boolean() takes them.
bool xattr_true(const std::string& dir, const char* name) {
  char value[16] = {};
  const ssize_t n = getxattr(dir.c_str(), name, value, sizeof value - 1);
  if (n <= 0) return false;
  const std::string_view v(value, static_cast<std::size_t>(n));
  return v == "1" || v == "y" || v == "yes" || v == "true" || v == "on";
}

bool delegated(const std::string& dir) {
  return xattr_true(dir, "trusted.delegate") || xattr_true(dir, "user.delegate");
}

}  // namespace

std::string cgroup_not_ours_reason(const std::string& mount, const std::string& cgroup, bool systemd_booted) {
  std::string path = cgroup == "/" ? std::string() : cgroup;
  while (!path.empty()) {
    const auto slash = path.rfind('/');
    const std::string name = path.substr(slash + 1);
    if (names_a_unit(name)) {
      if (delegated(mount + path)) return std::string();
      return fmt::format("gpureap's cgroup {} belongs to systemd's unit {}, which was not delegated (Delegate=yes)", cgroup,
                         name);
    }
    path.erase(slash == std::string::npos ? 0 : slash);
  }
  if (systemd_booted && !delegated(mount)) {
    return fmt::format("gpureap's cgroup {} belongs to systemd, which did not delegate it (Delegate=yes)", cgroup);
  }
  return std::string();
}

std::optional<JobCgroup> JobCgroup::create(const std::string& proc_root, std::string* why,
                                           const std::string& systemd_dir) {
  auto fail = [why](std::string reason) -> std::optional<JobCgroup> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const auto mount = cgroupfs::cgroup2_mount(proc_root);
  if (!mount) return fail("no cgroup v2 hierarchy is mounted");
  const auto own = procfs::read_cgroup_v2_path(proc_root, getpid());
  if (!own) return fail("gpureap's own cgroup v2 could not be read");
  const std::string parent = *mount + (*own == "/" ? std::string() : *own);
  struct stat booted{};
  const bool systemd_booted = lstat(systemd_dir.c_str(), &booted) == 0 && S_ISDIR(booted.st_mode);
  if (std::string reason = cgroup_not_ours_reason(*mount, *own, systemd_booted); !reason.empty()) return fail(reason);
  JobCgroup cgroup;
  cgroup.path_ = fmt::format("{}/gpureap-run.{}", parent, getpid());
  if (mkdir(cgroup.path_.c_str(), 0755) != 0) {
    return fail(fmt::format("cannot create {}: {}", cgroup.path_, std::strerror(errno)));
  }
  // Without these the engine can neither freeze nor kill the job whole: no better than a tree.
  if (access((cgroup.path_ + "/cgroup.kill").c_str(), F_OK) != 0 ||
      access((cgroup.path_ + "/cgroup.freeze").c_str(), F_OK) != 0) {
    rmdir(cgroup.path_.c_str());
    return fail("the cgroup v2 hierarchy has no cgroup.kill or cgroup.freeze (Linux 5.14 or later needed)");
  }
  cgroup.dir_ = procfs::unique_fd(open(cgroup.path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  cgroup.procs_ = procfs::unique_fd(open((cgroup.path_ + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  if (!cgroup.procs_) {
    const int error = errno;
    rmdir(cgroup.path_.c_str());
    return fail(fmt::format("cannot open {}/cgroup.procs: {}", cgroup.path_, std::strerror(error)));
  }
  return cgroup;
}

JobCgroup::JobCgroup(JobCgroup&& other) noexcept
    : path_(std::move(other.path_)), dir_(std::move(other.dir_)), procs_(std::move(other.procs_)),
      removed_(other.removed_) {
  other.path_.clear();  // the moved-from object must not remove the directory
}

JobCgroup::~JobCgroup() {
  if (!path_.empty() && !removed_) remove();
}

std::vector<pid_t> JobCgroup::member_pids() const { return cgroupfs::cgroup_subtree_pids(path_); }

bool JobCgroup::remove() {
  if (removed_ || path_.empty()) return true;
  procs_ = procfs::unique_fd();
  dir_ = procfs::unique_fd();
  remove_tree(path_);
  removed_ = access(path_.c_str(), F_OK) != 0;
  return removed_;
}

}  // namespace gpureap::job
