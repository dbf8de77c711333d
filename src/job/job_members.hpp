// Who belongs to the job, and what each member is doing. Ownership is proof, never a guess:
// the processes in the job's cgroup, and gpureap's descendants (as a child subreaper, every
// process the job forks stays below it, double-forked and setsid'd ones included), each
// pinned and then shown to be in the cgroup, or under its living parent, by a read through
// the pin (kill/tree_sweep's one walk): a PID reused by a stranger between the read and the pin
// never joins. The process group is used to forward signals, never to decide membership.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <sys/types.h>

#include "proc/process_info.hpp"

namespace gpureap::job {

class JobCgroup;

enum class Ownership {
  Cgroup,          // the job's own cgroup v2 (and gpureap's descendants)
  SubreaperTree,   // no cgroup: gpureap's descendants, as their child subreaper
};
const char* ownership_name(Ownership ownership);  // "cgroup", "subreaper-tree"

struct JobMember {
  StatFields stat;
  std::vector<unsigned> gpu_minors;  // N of each /dev/nvidia<N> it holds
  bool holds_control_file = false;   // nvidiactl and friends only
  // Pinned and shown to be the job's through the pin (under gpureap, or in the job's cgroup).
  // False only when it could not be pinned (no descriptors left): never signalled then.
  bool proven = true;
};

// One look at the job: its live members (zombies left out: they hold nothing) by PID.
using Members = std::map<pid_t, JobMember>;

struct MembershipSettings {
  std::string proc_root = "/proc";
  std::string dev_dir = "/dev";
  pid_t self = 0;                       // gpureap run
  const JobCgroup* cgroup = nullptr;    // null: subreaper tree only
  // Called with each list of PIDs read (a children file, cgroup.procs) before any of them is
  // pinned: a test's seam to put a stranger on a member's PID between the read and the pin.
  std::function<void(const std::vector<pid_t>& read)> after_read;
};

Members list_members(const MembershipSettings& settings);

// Sends sig to each member of the job in process_group, through a pin taken again (PID and start
// time), and returns the PIDs signalled. A member not proven through a pin is skipped, as the
// ladder skips it: its PID was read bare and may name a stranger by now. So is a process that
// merely joined the group: any process of the session may, and it is not the job.
std::vector<pid_t> signal_group_members(const MembershipSettings& settings, pid_t process_group, int sig);

// The GPU device files pid holds (one readlink per descriptor).
void read_gpu_files(const std::string& proc_root, const std::string& dev_dir, JobMember& member);

}  // namespace gpureap::job
