#include "spawn/process_start.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "proc/pid_files.hpp"
#include "spawn/descendant_sweep.hpp"
#include "spawn/spawn_hygiene.hpp"

extern char** environ;

namespace gpureap {
namespace {

using procfs::unique_fd;

// One message on the report pipe, written whole (far below PIPE_BUF, so never interleaved).
struct Report {
  enum Kind : int { Failed = 1, Finished = 2 } kind = Failed;
  int stage = 0;        // Failed: a StartStage
  int error = 0;        // Failed: its errno
  int wait_status = 0;  // Finished: the program's, from waitpid
  int timed_out = 0;    // Finished: it was killed at the deadline
  int swept = 0;        // Finished: every descendant was ended
};

// Everything the child needs, made before the fork: the child must not allocate.
struct Prepared {
  const StartRequest& request;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<gid_t> groups;
  bool script = false;  // a "#!" file: its interpreter opens it as /dev/fd/N, so N stays open
};

std::vector<char*> pointers(const std::vector<std::string>& words) {
  std::vector<char*> out;
  out.reserve(words.size() + 1);
  for (const auto& w : words) out.push_back(const_cast<char*>(w.c_str()));
  out.push_back(nullptr);
  return out;
}

// Whether the open file starts with "#!", read through a fresh open of the same inode
// (/proc/self/fd/N): an O_PATH descriptor cannot be read. Unknown counts as a binary.
bool starts_with_shebang(int fd) {
  const unique_fd readable(::open(fmt::format("/proc/self/fd/{}", fd).c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  char head[2] = {0, 0};
  return readable && ::pread(readable.get(), head, 2, 0) == 2 && head[0] == '#' && head[1] == '!';
}

void report(int fd, const Report& message) {
  ssize_t n;
  do {
    n = ::write(fd, &message, sizeof message);
  } while (n < 0 && errno == EINTR);
}

[[noreturn]] void fail_in_child(int report_fd, StartStage stage, int error) {
  Report message;
  message.stage = static_cast<int>(stage);
  message.error = error;
  report(report_fd, message);
  ::_exit(127);
}

// A descriptor the child still needs, moved above 2 when it sits where a standard one goes
// (gpureap started with 0, 1 or 2 closed), so that no dup2 onto 0-2 closes it first.
int above_standard(int fd) {
  return fd >= 0 && fd < 3 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 3) : fd;
}

// The child's side, from fork to exec. Async-signal-safe calls only.
[[noreturn]] void become_program(const Prepared& p, int report_fd, bool in_cgroup) {
  const StartRequest& r = p.request;
  report_fd = above_standard(report_fd);
  const int program_fd = above_standard(r.program_fd);
  // Into the cgroup first: nothing the program runs may start outside it.
  if (!in_cgroup && r.cgroup_procs_fd >= 0 && ::write(r.cgroup_procs_fd, "0", 1) != 1) {
    fail_in_child(report_fd, StartStage::Cgroup, errno);
  }
  ::setpgid(0, 0);
  // SIGTTOU is ignored (inherited from gpureap) so that a background group may take it.
  if (r.terminal_fd >= 0) ::tcsetpgrp(r.terminal_fd, ::getpid());
  const int sources[3] = {above_standard(r.stdin_fd), above_standard(r.stdout_fd), above_standard(r.stderr_fd)};
  for (int target = 0; target < 3; ++target) {
    if (sources[target] >= 0 && ::dup2(sources[target], target) < 0) {
      fail_in_child(report_fd, StartStage::Descriptors, errno);
    }
  }
  if (r.clean_slate) {
    spawn_child::close_descriptors_except(report_fd, program_fd);
    spawn_child::default_signal_dispositions();
    if (const int e = spawn_child::reset_resource_limits()) fail_in_child(report_fd, StartStage::Limits, e);
    if (::chdir("/") != 0) fail_in_child(report_fd, StartStage::Descriptors, errno);
  } else {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGTTOU, SIGTTIN, SIGPIPE}) ::sigaction(sig, &dfl, nullptr);
  }
  if (r.run_as) {
    const int e = spawn_child::drop_credentials(r.run_as->uid, r.run_as->gid, p.groups.data(),
                                                static_cast<int>(p.groups.size()));
    if (e != 0) fail_in_child(report_fd, StartStage::Credentials, e);
  }
  ::sigprocmask(SIG_SETMASK, &r.mask, nullptr);
  if (program_fd >= 0) {
    if (p.script) ::fcntl(program_fd, F_SETFD, 0);
    ::syscall(SYS_execveat, program_fd, "", p.argv.data(), p.envp.data(), AT_EMPTY_PATH);
    if (errno == ENOSYS) ::fexecve(program_fd, p.argv.data(), p.envp.data());
  } else if (r.inherit_environment) {
    ::execvp(p.argv[0], p.argv.data());
  } else {
    ::execvpe(p.argv[0], p.argv.data(), p.envp.data());
  }
  fail_in_child(report_fd, StartStage::Exec, errno);
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

// From /proc/self/stat's num_threads. Unknown counts as several.
bool single_threaded() {
  const auto stat = procfs::read_stat("/proc", ::getpid());
  return stat && stat->num_threads == 1;
}

// Born in the cgroup (clone3 with CLONE_INTO_CGROUP): moving a running process into a cgroup
// waits for an RCU grace period (docs/performance.md), being born there does not. A raw
// clone3 leaves the child in the state fork() would only in a single-threaded process (glibc's
// fork also resets its own locks for the child): with threads, fork() and cgroup.procs.
pid_t fork_into_cgroup(int cgroup_dir_fd, bool& in_cgroup) {
  in_cgroup = false;
  if (cgroup_dir_fd < 0 || !single_threaded()) return -2;
  CloneArgs args;
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<std::uint64_t>(cgroup_dir_fd);
  const auto pid = static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
  in_cgroup = pid >= 0;
  return pid < 0 ? -2 : pid;
}

Prepared prepare(const StartRequest& request, std::vector<std::string>& env_storage) {
  Prepared p{request, pointers(request.argv), {}, {}, false};
  if (request.inherit_environment) {
    for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  } else {
    env_storage = request.environment;
  }
  p.envp = pointers(env_storage);
  if (request.run_as) p.groups = request.run_as->groups;
  if (request.program_fd >= 0) p.script = starts_with_shebang(request.program_fd);
  return p;
}

// What both starts do before they fork: the program prepared (`prepared` points into
// `env_storage`, so a Launch stays where it was made) and the pipe its side reports on.
struct Launch {
  std::vector<std::string> env_storage;
  Prepared prepared;
  unique_fd report_read, report_write;
  int error = 0;  // errno when the pipe could not be made: nothing may start

  explicit Launch(const StartRequest& request) : prepared(prepare(request, env_storage)) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
      error = errno;
      return;
    }
    report_read = unique_fd(fds[0]);
    report_write = unique_fd(fds[1]);
  }
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;
};

// A start that made no process: what failed, and its errno.
template <typename Result>
Result not_started(int error) {
  Result result;
  result.failed_at = StartStage::Fork;
  result.error = error;
  return result;
}

long long monotonic_ns() {
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec;
}

// The keeper's side: start the program, wait for it until the deadline, end every descendant,
// report. Async-signal-safe calls only.
[[noreturn]] void keep(const Prepared& p, int report_fd, long long deadline_ns) {
  sigset_t all;
  ::sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);  // SIGKILL alone ends the keeper
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, nullptr);  // gpureap gone: its report is lost, the sweep is not
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) fail_in_child(report_fd, StartStage::Keeper, errno);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  const pid_t program = ::_Fork();  // no fork handlers: they may take locks of threads that are not here
#else
  const pid_t program = ::fork();
#endif
  if (program == 0) become_program(p, report_fd, false);
  if (program < 0) fail_in_child(report_fd, StartStage::Fork, errno);
  ::setpgid(program, program);  // both sides, so the group exists whoever runs first
  spawn_child::close_descriptors_except(report_fd, -1);
  ::close(0);
  ::close(1);
  ::close(2);  // the program's output pipe ends when the program and its descendants do
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, program, 0));
  Report message;
  message.kind = Report::Finished;
  bool ended = false;
  for (;;) {
    const pid_t reaped = ::waitpid(program, &message.wait_status, WNOHANG | __WALL);
    if (reaped == program) {
      ended = true;
      break;
    }
    const long long left_ms = (deadline_ns - monotonic_ns()) / 1000000;
    if (left_ms <= 0) break;
    if (pidfd >= 0) {
      struct pollfd wait_for {pidfd, POLLIN, 0};
      ::poll(&wait_for, 1, static_cast<int>(left_ms < 1000 ? left_ms + 1 : 1000));
    } else {
      const struct timespec tick {0, 10 * 1000 * 1000};
      ::nanosleep(&tick, nullptr);
    }
  }
  if (!ended) {
    // The leader is not reaped: its PID, and so its group's ID, cannot name anyone else yet.
    ::kill(-program, SIGKILL);
    ::kill(program, SIGKILL);
    while (::waitpid(program, &message.wait_status, __WALL) < 0 && errno == EINTR) {
    }
    message.timed_out = 1;
  }
  message.swept = spawn_child::end_all_children() ? 1 : 0;
  report(report_fd, message);
  ::_exit(0);
}

}  // namespace

std::string_view start_stage_words(StartStage stage) {
  switch (stage) {
    case StartStage::None: return "started";
    case StartStage::Fork: return "cannot start a process";
    case StartStage::Keeper: return "cannot become the subreaper of its descendants";
    case StartStage::Cgroup: return "cannot enter the job's cgroup";
    case StartStage::Descriptors: return "cannot set up its standard input and output";
    case StartStage::Limits: return "cannot reset its resource limits";
    case StartStage::Credentials: return "cannot take on the credentials it runs with";
    case StartStage::Exec: return "cannot run";
  }
  return "cannot run";
}

StartResult start_process(const StartRequest& request) {
  Launch launch(request);
  if (launch.error != 0) return not_started<StartResult>(launch.error);
  StartResult result;
  bool in_cgroup = false;
  pid_t pid = fork_into_cgroup(request.cgroup_dir_fd, in_cgroup);
  if (pid == -2) pid = ::fork();
  if (pid < 0) return not_started<StartResult>(errno);
  if (pid == 0) become_program(launch.prepared, launch.report_write.get(), in_cgroup);
  launch.report_write = unique_fd();
  // Both sides set the group, so that signals sent to it right after fork reach the child.
  ::setpgid(pid, pid);
  result.pid = pid;
  Report message;
  ssize_t n;
  do {
    n = ::read(launch.report_read.get(), &message, sizeof message);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof message)) {
    result.failed_at = static_cast<StartStage>(message.stage);
    result.error = message.error;
  }
  return result;
}

KeptProgram start_kept(const StartRequest& request, std::chrono::steady_clock::time_point deadline) {
  Launch launch(request);
  if (launch.error != 0) return not_started<KeptProgram>(launch.error);
  KeptProgram kept;
  // steady_clock is CLOCK_MONOTONIC: the keeper reads the same clock.
  const long long deadline_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.time_since_epoch()).count();
  const pid_t keeper = ::fork();
  if (keeper < 0) return not_started<KeptProgram>(errno);
  if (keeper == 0) keep(launch.prepared, launch.report_write.get(), deadline_ns);
  kept.keeper = keeper;
  kept.keeper_pidfd = unique_fd(static_cast<int>(::syscall(SYS_pidfd_open, keeper, 0)));
  kept.report = std::move(launch.report_read);
  return kept;
}

KeptEnd read_keeper_report(int report_fd) {
  KeptEnd end;
  ::fcntl(report_fd, F_SETFL, O_NONBLOCK);
  Report message;
  for (;;) {
    const ssize_t n = ::read(report_fd, &message, sizeof message);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof message)) break;
    if (message.kind == Report::Failed && end.failed_at == StartStage::None) {
      end.outcome = KeptOutcome::NotStarted;
      end.failed_at = static_cast<StartStage>(message.stage);
      end.error = message.error;
    } else if (message.kind == Report::Finished) {
      end.descendants_ended = message.swept != 0;
      if (end.outcome == KeptOutcome::NotStarted) continue;  // the child that failed to exec, reaped
      if (message.timed_out != 0) {
        end.outcome = KeptOutcome::TimedOut;
      } else if (WIFSIGNALED(message.wait_status)) {
        end.outcome = KeptOutcome::Signalled;
        end.signal = WTERMSIG(message.wait_status);
      } else {
        end.outcome = KeptOutcome::Exited;
        end.exit_status = WEXITSTATUS(message.wait_status);
      }
    }
  }
  return end;
}

}  // namespace gpureap
