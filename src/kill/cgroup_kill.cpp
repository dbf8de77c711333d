#include "kill/cgroup_kill.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "kill/proc_peek.hpp"

namespace gpureap::killtree {

// Mountinfo: field 5 is the mount point; after " - " comes the filesystem type.
std::optional<std::string> cgroup2_mount(const std::string& proc_root) {
  std::ifstream mountinfo(proc_root + "/self/mountinfo");
  std::string line;
  while (std::getline(mountinfo, line)) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string id, parent, devno, root, mount_point;
    if (fields >> id >> parent >> devno >> root >> mount_point && root == "/") return mount_point;
  }
  return std::nullopt;
}

std::optional<std::string> own_cgroup_dir(const std::string& proc_root, pid_t pid) {
  std::ifstream file(proc_root + "/" + std::to_string(pid) + "/cgroup");
  std::string line, path;
  while (std::getline(file, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty() || path == "/" || path.find("..") != std::string::npos) return std::nullopt;
  const auto mount = cgroup2_mount(proc_root);
  if (!mount) return std::nullopt;
  std::string dir = *mount + path;
  if (access((dir + "/cgroup.kill").c_str(), W_OK) != 0) return std::nullopt;
  return dir;
}

std::vector<pid_t> cgroup_subtree_pids(const std::string& cgroup_dir) {
  std::vector<pid_t> pids;
  std::vector<std::string> stack{cgroup_dir};
  while (!stack.empty()) {
    const std::string dir = stack.back();
    stack.pop_back();
    std::ifstream procs(dir + "/cgroup.procs");
    long pid = 0;
    while (procs >> pid) pids.push_back(static_cast<pid_t>(pid));
    if (DIR* d = opendir(dir.c_str())) {
      while (const dirent* entry = readdir(d)) {
        if (entry->d_type == DT_DIR && entry->d_name[0] != '.') stack.push_back(dir + "/" + entry->d_name);
      }
      closedir(d);
    }
  }
  return pids;
}

bool cgroup_is_exactly(const std::string& proc_root, const std::string& cgroup_dir,
                       const std::unordered_set<pid_t>& members, pid_t job_pgid,
                       const std::unordered_set<pid_t>& excluded) {
  const auto pids = cgroup_subtree_pids(cgroup_dir);
  if (pids.empty()) return false;
  for (pid_t pid : pids) {
    if (excluded.count(pid) != 0) return false;
    if (members.count(pid) != 0) continue;
    const auto stat = killproc::read_stat(proc_root, pid);
    if (stat && (job_pgid <= 1 || stat->pgid != job_pgid)) return false;
  }
  return true;
}

int write_cgroup_kill(const std::string& cgroup_dir) {
  const int fd = ::open((cgroup_dir + "/cgroup.kill").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int error = ::write(fd, "1", 1) == 1 ? 0 : errno;
  ::close(fd);
  return error;
}

}  // namespace gpureap::killtree
