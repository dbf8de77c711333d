#include "job/job_members.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <string_view>

#include "job/job_cgroup.hpp"
#include "proc/pid_files.hpp"
#include "proc/proc_io.hpp"
#include "proc/proc_parse.hpp"

namespace gpureap::job {

const char* ownership_name(Ownership ownership) {
  switch (ownership) {
    case Ownership::Cgroup: return "cgroup";
    case Ownership::SubreaperTree: return "subreaper-tree";
  }
  return "?";
}

void read_gpu_files(const std::string& proc_root, const std::string& dev_dir, Member& member) {
  const std::string fd_dir = proc_root + "/" + std::to_string(member.stat.pid) + "/fd";
  procfs::unique_fd dir(open(fd_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return;
  procfs::DirLister lister;
  char target[512];
  lister.for_each(dir.get(), [&](const char* name, unsigned char) {
    const ssize_t n = readlinkat(dir.get(), name, target, sizeof target - 1);
    if (n <= 0) return true;
    const auto handle = classify_device_path(std::string_view(target, static_cast<std::size_t>(n)), dev_dir);
    if (!handle) return true;
    if (handle->kind == DeviceFileKind::Gpu) {
      const auto minor = static_cast<unsigned>(handle->minor);
      bool seen = false;
      for (unsigned m : member.gpu_minors) seen = seen || m == minor;
      if (!seen) member.gpu_minors.push_back(minor);
    } else {
      member.holds_control_file = true;
    }
    return true;
  });
}

namespace {

// gpureap's descendants through /proc/<pid>/task/*/children: the cost follows the job's size,
// not the host's. nullopt without CONFIG_PROC_CHILDREN: then every process's parent is read.
std::optional<std::set<pid_t>> descendants_by_children(const std::string& proc_root, pid_t self) {
  std::set<pid_t> found;
  std::vector<pid_t> stack{self};
  while (!stack.empty()) {
    const pid_t pid = stack.back();
    stack.pop_back();
    const auto children = procfs::read_children(proc_root, pid);
    if (!children) {
      if (pid == self) return std::nullopt;
      continue;  // it exited meanwhile
    }
    for (pid_t child : *children) {
      if (found.insert(child).second) stack.push_back(child);
    }
  }
  return found;
}

std::set<pid_t> descendants_by_parents(const std::string& proc_root, pid_t self) {
  std::set<pid_t> found;
  const auto stats = procfs::scan_stats(proc_root);
  std::map<pid_t, pid_t> parent;
  for (const auto& s : stats) parent[s.pid] = s.ppid;
  for (const auto& s : stats) {
    pid_t up = s.ppid;
    for (int depth = 0; up > 0 && depth < 4096; ++depth) {
      if (up == self) {
        found.insert(s.pid);
        break;
      }
      auto it = parent.find(up);
      if (it == parent.end()) break;
      up = it->second;
    }
  }
  found.erase(self);
  return found;
}

}  // namespace

Members list_members(const MembershipSettings& settings) {
  auto pids = descendants_by_children(settings.proc_root, settings.self);
  if (!pids) pids = descendants_by_parents(settings.proc_root, settings.self);
  if (settings.cgroup != nullptr) {
    for (pid_t pid : settings.cgroup->member_pids()) {
      if (pid != settings.self) pids->insert(pid);
    }
  }
  Members members;
  for (pid_t pid : *pids) {
    auto stat = procfs::read_stat(settings.proc_root, pid);
    if (!stat || stat->state == 'Z' || stat->state == 'X') continue;
    Member member;
    member.stat = std::move(*stat);
    read_gpu_files(settings.proc_root, settings.dev_dir, member);
    members.emplace(pid, std::move(member));
  }
  return members;
}

}  // namespace gpureap::job
