// What `gpureap run` did, as values: how the job ended, what was left of it and how that
// ended, the GPU memory it used and whether its release was verified, the evidence collected
// when it hung or would not end. Rendering, JSON (gpureap.run/1) and the exit status are the
// CLI's (cli/run_render).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "job/job_members.hpp"
#include "job/job_spawn.hpp"
#include "job/stuck_evidence.hpp"
#include "kill/kill_outcome.hpp"
#include "kill/memory_verification.hpp"

namespace gpureap::job {

// Why the job stopped running.
enum class JobEnd {
  Exited,       // the main command exited by itself (or on a signal gpureap forwarded)
  FailFast,     // --fail-fast: a process of the job that used a GPU died abnormally
  Hung,         // --hang-timeout: nothing in the job used CPU or GPU for that long
  SpawnFailed,  // the command could not be started
};
const char* job_end_name(JobEnd end);  // "exited", "fail-fast", "hung", "spawn-failed"

struct FailedProcess {
  pid_t pid = 0;
  std::string comm;      // raw: render through the sanitiser
  int wait_status = 0;
  bool seen_by_wait = false;  // our child or an orphan we reaped; else from the exit events
};

struct GpuUse {
  unsigned index = 0;                              // the driver's index (minor number without a driver)
  // false: no process of the job was seen on it, but memory no listed process holds grew
  // while the job ran (job_last_bytes of it): a leak made before the first look.
  bool seen = true;
  std::optional<std::uint64_t> used_first_bytes;   // the GPU's used memory at the first sample (before the job, when !seen)
  std::optional<std::uint64_t> used_at_end_bytes;  // !seen: its used memory when the job ended
  std::optional<std::uint64_t> used_after_bytes;   // after the job ended and its memory was verified
  std::uint64_t job_peak_bytes = 0;                // most the job's listed processes held at one sample
  std::uint64_t job_last_bytes = 0;                // what they held at the last sample
  std::vector<pid_t> job_pids;                     // job processes seen using it (listed or holding its file)
};

struct RunReport {
  std::vector<std::string> argv;
  pid_t main_pid = -1;
  Ownership ownership = Ownership::SubreaperTree;
  std::string cgroup_path;         // the job's cgroup, when Ownership::Cgroup
  std::string no_cgroup_reason;    // why not, otherwise
  bool cgroup_removed = false;
  bool exit_events = false;        // the kernel's exit events were used (root, host PID namespace)
  bool holder_events = false;      // GPU holders known from the kernel's events (holders/holder_tracker.hpp)
  unsigned looks_on_events = 0;    // looks made at once because a process of the job opened a GPU
  SpawnResult spawn;
  JobEnd end = JobEnd::Exited;
  std::optional<int> main_wait_status;
  std::optional<FailedProcess> failed;
  std::optional<double> idle_seconds;          // Hung: how long nothing ran
  std::vector<ProcessEvidence> evidence;       // Hung, or survivors of SIGTERM
  std::string evidence_dir;                    // where dumps went
  std::vector<TargetOutcome> ended;            // processes left after the end, and how each ended
  bool memory_checked = false;                 // a GPU was used, so its release was verified
  std::vector<GpuVerification> verification;
  std::vector<GpuUse> gpus;
  std::vector<int> forwarded_signals;          // in the order received
  unsigned orphans_reaped = 0;
  std::vector<std::string> notes;
  double run_seconds = 0;                      // start to the end of the job
  double ending_seconds = 0;                   // ending what was left
  double verify_seconds = 0;                   // verifying the release
  unsigned samples = 0;

  // Something of the job outlived the ladder, or a GPU's memory was not verified free.
  bool left_behind() const;
};

}  // namespace gpureap::job
