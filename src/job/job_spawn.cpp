#include "job/job_spawn.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sys/syscall.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
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

// The kernel's struct clone_args up to `cgroup` (CLONE_ARGS_SIZE_VER2, Linux 5.7).
struct CloneArgs {
  std::uint64_t flags = 0;
  std::uint64_t pidfd = 0;
  std::uint64_t child_tid = 0;
  std::uint64_t parent_tid = 0;
  std::uint64_t exit_signal = 0;
  std::uint64_t stack = 0;
  std::uint64_t stack_size = 0;
  std::uint64_t tls = 0;
  std::uint64_t set_tid = 0;
  std::uint64_t set_tid_size = 0;
  std::uint64_t cgroup = 0;
};
static_assert(sizeof(CloneArgs) == 88);

// Born in the job's cgroup (clone3 with CLONE_INTO_CGROUP): moving a running process into a
// cgroup waits for an RCU grace period (docs/performance.md), being born there does not.
// -1 with errno when the kernel cannot (then fork() and a write to cgroup.procs instead).
pid_t fork_into_cgroup(int cgroup_dir_fd) {
  CloneArgs args;
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<std::uint64_t>(cgroup_dir_fd);
  return static_cast<pid_t>(syscall(SYS_clone3, &args, sizeof args));
}

// From /proc/self/stat's num_threads (field 20). Unknown counts as several.
bool single_threaded() {
  char text[1024];
  const int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  const char* p = std::strrchr(text, ')');
  // After "comm)": state is field 3, num_threads field 20.
  for (int field = 2; p != nullptr && field < 20; ++field) p = std::strchr(p + 1, ' ');
  return p != nullptr && std::strtol(p + 1, nullptr, 10) == 1;
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
  // A raw clone3 leaves the child in the state fork() would only in a single-threaded process
  // (glibc's fork also resets its own locks for the child). The driver library, read for the
  // baseline before the job starts, may have started threads: then fork() and cgroup.procs.
  bool in_cgroup = false;
  pid_t pid = -1;
  if (settings.cgroup_dir_fd >= 0 && single_threaded()) {
    pid = fork_into_cgroup(settings.cgroup_dir_fd);
    in_cgroup = pid >= 0;
  }
  if (pid < 0) pid = fork();
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
    if (!in_cgroup && settings.cgroup_procs_fd >= 0 && write(settings.cgroup_procs_fd, "0", 1) != 1) {
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
