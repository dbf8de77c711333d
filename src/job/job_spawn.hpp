// Starting the job through the one start (spawn/process_start.hpp): in the child its own
// process group, the terminal's foreground (when gpureap had it), the job's cgroup, the
// caller's signal mask, and exec of argv[0] found in PATH. A failure in the child before exec
// comes back as a stage and an errno, so "command not found" is told apart from a command that
// exits 127 itself.
#pragma once

#include <string>
#include <vector>

#include <signal.h>
#include <sys/types.h>

namespace gpureap::job {

struct SpawnSettings {
  std::vector<std::string> argv;   // argv[0] is looked up in PATH like a shell does
  int cgroup_dir_fd = -1;          // the job's cgroup directory (clone3 into it), or -1
  int cgroup_procs_fd = -1;        // its cgroup.procs, for kernels without CLONE_INTO_CGROUP
  int terminal_fd = -1;            // hand the foreground of this terminal to the job, or -1
  sigset_t original_mask{};        // restored in the child before exec
};

enum class SpawnStage { None, Cgroup, Exec, Fork };

struct SpawnResult {
  pid_t pid = -1;             // the job's main process (leader of its own process group)
  SpawnStage failed_at = SpawnStage::None;
  int error = 0;              // errno of the failed stage
  bool ok() const { return failed_at == SpawnStage::None; }
};

SpawnResult spawn_job(const SpawnSettings& settings);

}  // namespace gpureap::job
