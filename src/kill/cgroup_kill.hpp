// A swept tree's own cgroup v2: frozen with cgroup.freeze (atomic, nothing in it can fork
// or run until thawed) and ended with cgroup.kill (one write ends every process in the
// subtree, even one forked after our last sweep whose parent then exited).
//
// The rule: cgroup.kill is written only when every process in the cgroup is a
// member of the frozen, pinned plan, read again after the final freeze, with a PID that
// cannot be verified counting as a stranger; never once every member has exited (the
// cgroup may already hold the next job step or a restarted service); and only through the
// directory fd by which the cgroup was frozen and its members read. Sharing the target's
// process group proves nothing: the parent shell and siblings share it too.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "proc/proc_io.hpp"

namespace gpureap::cgroupfs {

// Where the unified (v2) hierarchy is mounted (/sys/fs/cgroup, or /sys/fs/cgroup/unified on
// hybrid hosts), from <proc_root>/self/mountinfo; nullopt when there is none.
std::optional<std::string> cgroup2_mount(const std::string& proc_root);

// The cgroup v2 directory of pid (mount point + the "0::" path of <proc_root>/<pid>/cgroup),
// when a cgroup2 hierarchy is mounted, the path is not the root and it has cgroup.kill and
// cgroup.freeze.
std::optional<std::string> own_cgroup_dir(const std::string& proc_root, pid_t pid);

// Every PID in the cgroup and its descendant cgroups (cgroup.procs, recursively).
std::vector<pid_t> cgroup_subtree_pids(const std::string& cgroup_dir);
// The same, nullopt when a cgroup.procs could not be read. A read takes no lock: a gpureap
// acting on the cgroup (CgroupDir) does not make it unreadable.
std::optional<std::vector<pid_t>> read_subtree_pids(const std::string& cgroup_dir);

// Writes "1" to <cgroup_dir>/cgroup.kill. Returns 0 or the errno. (Tests clean up with it.)
int write_cgroup_kill(const std::string& cgroup_dir);

// One cgroup v2 directory, held by a directory fd: freezing, the members and cgroup.kill all
// go through that fd, so they concern the same cgroup even if the path is replaced.
class CgroupDir {
 public:
  // Opens the directory and takes an exclusive flock on it, waiting at most lock_bound for
  // another gpureap acting on the same cgroup; nullopt when it could not be opened or locked.
  static std::optional<CgroupDir> open(const std::string& path,
                                       std::chrono::milliseconds lock_bound = std::chrono::seconds(5));
  CgroupDir(CgroupDir&&) noexcept = default;
  CgroupDir& operator=(CgroupDir&&) noexcept = default;
  ~CgroupDir() { thaw(); }  // never leave a cgroup frozen, whatever path we leave by

  const std::string& path() const { return path_; }
  // Every PID in the subtree, read through the fd; nullopt when a cgroup.procs could not be
  // read (an unreadable cgroup is never killed).
  std::optional<std::vector<pid_t>> member_pids() const;
  // Reads cgroup.freeze first: already frozen by someone else means false, nothing written
  // (that freeze is never thawed by us). Otherwise writes 1 and waits (at most `bound`) for
  // "frozen 1" in cgroup.events; false when it did not settle: the cgroup is thawed again.
  bool freeze(std::chrono::milliseconds bound);
  // Writes 0 to cgroup.freeze when we froze it. Never throws; safe to call twice.
  void thaw() noexcept;
  bool frozen_by_us() const { return frozen_; }
  // cgroup.freeze reads 1 (or cannot be read) and the freeze is not ours.
  bool frozen_by_someone_else() const;
  // openat(fd, "cgroup.kill") and write "1". Returns 0 or the errno.
  int kill() const;

 private:
  CgroupDir() = default;
  std::string path_;
  procfs::unique_fd dir_;
  bool frozen_ = false;
};

}  // namespace gpureap::cgroupfs
