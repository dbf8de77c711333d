#include "job/job_members.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <string_view>
#include <unordered_set>

#include "job/job_cgroup.hpp"
#include "kill/pid_ref.hpp"
#include "kill/tree_sweep.hpp"
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

void read_gpu_files(const std::string& proc_root, const std::string& dev_dir, JobMember& member) {
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

// Descriptors kept free for the reads of /proc the walk and each member's description make.
constexpr std::size_t kReadReserve = 8;

Members list_members(const MembershipSettings& settings) {
  Members members;
  const std::string& proc_root = settings.proc_root;
  // Each member is proven through its pin (the walk and the cgroup check read /proc again
  // through it), and described only while the pin still names it.
  std::size_t budget = sweep::pidfd_budget(kReadReserve);
  const auto keep = [&](PidRef ref, char) {
    ++budget;  // `ref` is closed on the way out
    auto stat = ref.read_stat(proc_root);
    if (!stat) return;
    JobMember member;
    member.stat = std::move(*stat);
    read_gpu_files(proc_root, settings.dev_dir, member);
    if (!ref.read_stat(proc_root)) return;  // the descriptors read may be a stranger's
    members.insert_or_assign(member.stat.pid, std::move(member));
  };
  // A member that cannot be pinned (no descriptors left) is listed, unproven: never signalled.
  const auto unpinned = [&](pid_t pid, const PinResult&) {
    auto stat = procfs::read_stat(proc_root, pid);
    if (!stat || stat->state == 'Z' || stat->state == 'X') return;
    JobMember member;
    member.stat = std::move(*stat);
    member.proven = false;
    members.emplace(pid, std::move(member));
  };
  std::unordered_set<pid_t> known{settings.self};
  const std::unordered_set<pid_t> excluded;
  if (const auto self_stat = procfs::read_stat(proc_root, settings.self)) {
    PinResult self = PidRef::pin(settings.self, self_stat->start_time_ticks, proc_root);
    if (self.status == PinStatus::Ok) {
      sweep::SweepScope scope;
      scope.members.push_back(&self.ref);
      scope.descendants = true;
      scope.after_read = settings.after_read;
      sweep::sweep_once(proc_root, scope, known, excluded, budget, keep, unpinned);
    }
  }
  if (settings.cgroup != nullptr) {
    const std::vector<pid_t> read = settings.cgroup->member_pids();
    if (settings.after_read) settings.after_read(read);
    sweep::pin_cgroup_members(proc_root, settings.cgroup->path(), read, known, excluded, budget, keep, unpinned);
  }
  return members;
}

std::vector<pid_t> signal_group_members(const MembershipSettings& settings, pid_t process_group, int sig) {
  std::vector<pid_t> signalled;
  for (const auto& [pid, member] : list_members(settings)) {
    if (!member.proven || member.stat.pgid != process_group) continue;
    PinResult pin = PidRef::pin(pid, member.stat.start_time_ticks, settings.proc_root);
    if (pin.status == PinStatus::Ok && pin.ref.send_signal(sig) == 0) signalled.push_back(pid);
  }
  return signalled;
}

}  // namespace gpureap::job
