// The job's own cgroup v2, created by `gpureap run` beside nothing else: a child of the cgroup
// gpureap runs in, named gpureap-run.<pid>, and only where that cgroup is gpureap's to divide
// (see cgroup_is_ours). Everything in it belongs to the job (only root or
// the cgroup's owner can move a process out), so it is the proof of ownership that lets the
// kill engine freeze the job whole and end it with cgroup.kill. Removed when the job is over.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "proc/proc_io.hpp"

namespace gpureap::job {

// Whether a child cgroup may be created under `cgroup` (a path below the cgroup2 mount, "/" its
// root): systemd owns the tree it manages and hands a part of it over only by delegation
// (Delegate=yes), which it marks on the unit's cgroup with the extended attribute
// trusted.delegate, or user.delegate for a user's manager, set to a true boolean (systemd's
// docs/CGROUP_DELEGATION.md; its cg_is_delegated() in src/basic/cgroup-util.c reads the same
// two). The nearest cgroup on the way up that is named like a systemd unit (.slice, .scope,
// .service) decides: marked, the subtree is ours; unmarked (an ssh session's scope, a service
// without Delegate=yes), it is not. Without such a cgroup the tree is systemd's only on a host
// booted with it (`systemd_booted`); otherwise (a container's own cgroup namespace, a plain
// cgroupfs) nobody else manages it. "" when ours, else why not.
std::string cgroup_not_ours_reason(const std::string& mount, const std::string& cgroup, bool systemd_booted);

class JobCgroup {
 public:
  // Creates <cgroup2 mount><own cgroup>/gpureap-run.<pid>. nullopt, with the reason in *why,
  // when there is no cgroup v2 hierarchy, gpureap's cgroup is systemd's and was not delegated
  // (cgroup_is_ours), it has no cgroup.kill/cgroup.freeze (Linux < 5.14), or we may not create
  // or enter it. `systemd_dir` is where a host booted with systemd has its runtime directory.
  static std::optional<JobCgroup> create(const std::string& proc_root, std::string* why,
                                         const std::string& systemd_dir = "/run/systemd/system");

  JobCgroup(JobCgroup&& other) noexcept;
  JobCgroup& operator=(JobCgroup&&) = delete;
  ~JobCgroup();

  const std::string& path() const { return path_; }
  // Opened before the fork: the child is born in the directory (clone3), or on an older
  // kernel writes "0" to cgroup.procs to enter it before exec.
  int dir_fd() const { return dir_.get(); }
  int procs_fd() const { return procs_.get(); }
  // Every PID in the cgroup and the cgroups below it (the job may make its own).
  std::vector<pid_t> member_pids() const;
  // rmdir, once it is empty (and its sub-cgroups, deepest first). False when something is
  // still in it: the directory stays, and the report says so.
  bool remove();

 private:
  JobCgroup() = default;
  std::string path_;
  procfs::unique_fd dir_;
  procfs::unique_fd procs_;
  bool removed_ = false;
};

}  // namespace gpureap::job
