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

Members list_members(const MembershipSettings& settings) {
  std::set<pid_t> pids;
  // Descendants of gpureap: walk the parent links of every process once.
  const auto stats = procfs::scan_stats(settings.proc_root);
  std::map<pid_t, const StatFields*> by_pid;
  for (const auto& s : stats) by_pid[s.pid] = &s;
  for (const auto& s : stats) {
    if (s.pid == settings.self) continue;
    pid_t up = s.ppid;
    for (int depth = 0; up > 0 && depth < 4096; ++depth) {
      if (up == settings.self) {
        pids.insert(s.pid);
        break;
      }
      auto it = by_pid.find(up);
      if (it == by_pid.end()) break;
      up = it->second->ppid;
    }
  }
  if (settings.cgroup != nullptr) {
    for (pid_t pid : settings.cgroup->member_pids()) {
      if (pid != settings.self) pids.insert(pid);
    }
  }
  Members members;
  for (pid_t pid : pids) {
    std::optional<StatFields> stat;
    if (auto it = by_pid.find(pid); it != by_pid.end()) {
      stat = *it->second;
    } else {
      stat = procfs::read_stat(settings.proc_root, pid);  // joined the cgroup after the scan
    }
    if (!stat || stat->state == 'Z' || stat->state == 'X') continue;
    Member member;
    member.stat = std::move(*stat);
    read_gpu_files(settings.proc_root, settings.dev_dir, member);
    members.emplace(pid, std::move(member));
  }
  return members;
}

}  // namespace gpureap::job
