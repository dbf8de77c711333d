// The job's own cgroup v2, created by `gpureap run` beside nothing else: a child of the cgroup
// gpureap runs in, named gpureap-run.<pid>. Everything in it belongs to the job (only root or
// the cgroup's owner can move a process out), so it is the proof of ownership that lets the
// kill engine freeze the job whole and end it with cgroup.kill. Removed when the job is over.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "proc/proc_io.hpp"

namespace gpureap::job {

class JobCgroup {
 public:
  // Creates <cgroup2 mount><own cgroup>/gpureap-run.<pid>. nullopt, with the reason in *why,
  // when there is no cgroup v2 hierarchy, it has no cgroup.kill/cgroup.freeze (Linux < 5.14),
  // or we may not create or enter it (not root and not delegated).
  static std::optional<JobCgroup> create(const std::string& proc_root, std::string* why);

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
