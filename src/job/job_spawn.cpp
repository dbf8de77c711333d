#include "job/job_spawn.hpp"

#include "spawn/process_start.hpp"

namespace gpureap::job {
namespace {

SpawnStage job_stage(StartStage stage) {
  switch (stage) {
    case StartStage::None: return SpawnStage::None;
    case StartStage::Cgroup: return SpawnStage::Cgroup;
    case StartStage::Exec: return SpawnStage::Exec;
    case StartStage::Fork:
    case StartStage::Keeper:
    case StartStage::Descriptors:
    case StartStage::Limits:
    case StartStage::Credentials: break;  // not asked of a job's start
  }
  return SpawnStage::Fork;
}

}  // namespace

SpawnResult spawn_job(const SpawnSettings& settings) {
  // The user's program, as the user gave it: found in PATH, with gpureap's environment,
  // descriptors and limits (gpureap's own descriptors are all close-on-exec).
  StartRequest request;
  request.argv = settings.argv;
  request.inherit_environment = true;
  request.clean_slate = false;
  request.mask = settings.original_mask;
  request.terminal_fd = settings.terminal_fd;
  request.cgroup_dir_fd = settings.cgroup_dir_fd;
  request.cgroup_procs_fd = settings.cgroup_procs_fd;
  const StartResult started = start_process(request);
  SpawnResult result;
  result.pid = started.pid;
  result.failed_at = job_stage(started.failed_at);
  result.error = started.error;
  return result;
}

}  // namespace gpureap::job
