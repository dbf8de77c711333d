#include "job/job_cgroup.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>

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

}  // namespace

std::optional<JobCgroup> JobCgroup::create(const std::string& proc_root, std::string* why) {
  auto fail = [why](std::string reason) -> std::optional<JobCgroup> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const auto mount = killtree::cgroup2_mount(proc_root);
  if (!mount) return fail("no cgroup v2 hierarchy is mounted");
  const auto own = procfs::read_cgroup_v2_path(proc_root, getpid());
  if (!own) return fail("gpureap's own cgroup v2 could not be read");
  const std::string parent = *mount + (*own == "/" ? std::string() : *own);
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

std::vector<pid_t> JobCgroup::member_pids() const { return killtree::cgroup_subtree_pids(path_); }

bool JobCgroup::remove() {
  if (removed_ || path_.empty()) return true;
  procs_ = procfs::unique_fd();
  dir_ = procfs::unique_fd();
  remove_tree(path_);
  removed_ = access(path_.c_str(), F_OK) != 0;
  return removed_;
}

}  // namespace gpureap::job
