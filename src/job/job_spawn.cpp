#include "job/job_spawn.hpp"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpureap::job {
namespace {

struct ChildFailure {
  int stage = 0;
  int error = 0;
};

// Only async-signal-safe calls between fork and exec.
[[noreturn]] void fail_in_child(int pipe_fd, SpawnStage stage, int error) {
  const ChildFailure failure{static_cast<int>(stage), error};
  [[maybe_unused]] ssize_t n = write(pipe_fd, &failure, sizeof failure);
  _exit(127);
}

}  // namespace

SpawnResult spawn_job(const SpawnSettings& settings) {
  SpawnResult result;
  // The argument vector is built before the fork: the child must not allocate.
  std::vector<char*> argv;
  argv.reserve(settings.argv.size() + 1);
  for (const auto& arg : settings.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.failed_at = SpawnStage::Fork;
    result.error = errno;
    return result;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    result.failed_at = SpawnStage::Fork;
    result.error = errno;
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return result;
  }
  if (pid == 0) {
    close(pipe_fds[0]);
    // Into the cgroup first: nothing the job runs may start outside it.
    if (settings.cgroup_procs_fd >= 0 && write(settings.cgroup_procs_fd, "0", 1) != 1) {
      fail_in_child(pipe_fds[1], SpawnStage::Cgroup, errno);
    }
    setpgid(0, 0);
    if (settings.terminal_fd >= 0) {
      // SIGTTOU is ignored (inherited from gpureap) so that a background group may take it.
      tcsetpgrp(settings.terminal_fd, getpid());
    }
    // Dispositions gpureap changed go back to the default; handlers do not survive exec anyway.
    signal(SIGTTOU, SIG_DFL);
    signal(SIGTTIN, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &settings.original_mask, nullptr);
    execvp(argv[0], argv.data());
    fail_in_child(pipe_fds[1], SpawnStage::Exec, errno);
  }
  close(pipe_fds[1]);
  // Both sides set the group, so that signals sent to it right after fork reach the job.
  setpgid(pid, pid);
  result.pid = pid;
  ChildFailure failure;
  ssize_t n;
  do {
    n = read(pipe_fds[0], &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  close(pipe_fds[0]);
  if (n == static_cast<ssize_t>(sizeof failure)) {
    result.failed_at = static_cast<SpawnStage>(failure.stage);
    result.error = failure.error;
  }
  return result;
}

}  // namespace gpureap::job
