#include "spawn/timed_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "proc/proc_io.hpp"
#include "spawn/spawn_hygiene.hpp"

extern char** environ;

namespace gpureap {
namespace {

using procfs::unique_fd;

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

TimedRun not_started(std::string why) {
  TimedRun run;
  run.error = std::move(why);
  return run;
}

// Appends what is there to read now, up to the bound; false once the pipe is at its end.
bool drain(int fd, std::string& out, std::size_t max_bytes) {
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      const std::size_t room = max_bytes > out.size() ? max_bytes - out.size() : 0;
      out.append(buffer, std::min(room, static_cast<std::size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
}

}  // namespace

std::string find_executable(const std::string& name) {
  if (name.empty()) return {};
  if (name.find('/') != std::string::npos) return name.front() == '/' && executable_file(name) ? name : std::string();
  const char* path = std::getenv("PATH");
  std::string_view rest = path != nullptr ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (;;) {
    const auto colon = rest.find(':');
    const std::string_view dir = rest.substr(0, colon);
    if (!dir.empty() && dir.front() == '/') {
      std::string candidate = std::string(dir) + "/" + name;
      if (executable_file(candidate)) return candidate;
    }
    if (colon == std::string_view::npos) return {};
    rest.remove_prefix(colon + 1);
  }
}

TimedRun run_timed_command(const TimedCommand& command) {
  if (command.argv.empty()) return not_started("no command");
  if (command.program_fd >= 0 || command.run_as) return not_started("running a program by descriptor or as another user is not built yet");
  const std::string program = find_executable(command.argv.front());
  if (program.empty()) {
    return not_started(command.argv.front().find('/') == std::string::npos
                           ? fmt::format("{} is not installed (no absolute PATH entry holds it)", command.argv.front())
                           : fmt::format("{} is not an executable file given by its absolute path", command.argv.front()));
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if (command.give_input && ::pipe2(in, O_CLOEXEC) != 0) return not_started(std::string("pipe: ") + std::strerror(errno));
  unique_fd in_read(in[0]), in_write(in[1]);
  const bool capture = command.output == TimedCommand::Output::Capture;
  if (capture && ::pipe2(out, O_CLOEXEC) != 0) return not_started(std::string("pipe: ") + std::strerror(errno));
  unique_fd out_read(out[0]), out_write(out[1]);
  const int sink = capture ? out_write.get() : command.output_fd;
  if (sink < 0) return not_started("no output file");

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  if (command.give_input) {
    posix_spawn_file_actions_adddup2(&files, in_read.get(), STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  if (capture && command.capture_stderr_only) {
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  } else {
    posix_spawn_file_actions_adddup2(&files, sink, STDOUT_FILENO);
  }
  posix_spawn_file_actions_adddup2(&files, sink, STDERR_FILENO);
  // A refusal (an old C library) leaves only close-on-exec descriptors closed: not worth failing.
  (void)close_inherited_descriptors(files);
  // gpureap blocks the signals a signalfd reads and ignores SIGPIPE: the helper starts with
  // neither, and in a group of its own, so that its timeout ends whatever it started.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD, SIGTSTP, SIGTTIN, SIGTTOU}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const auto& a : command.argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const bool replaced = std::any_of(command.extra_env.begin(), command.extra_env.end(), [&](const std::string& x) {
      const auto eq = x.find('=');
      return eq != std::string::npos && entry.substr(0, eq + 1) == std::string_view(x).substr(0, eq + 1);
    });
    if (!replaced) env_text.emplace_back(entry);
  }
  env_text.insert(env_text.end(), command.extra_env.begin(), command.extra_env.end());
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t child = -1;
  const int spawned = ::posix_spawn(&child, program.c_str(), &files, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  in_read = unique_fd();
  out_write = unique_fd();
  if (spawned != 0) return not_started(fmt::format("cannot run {}: {}", program, std::strerror(spawned)));

  TimedRun run;
  run.program = program;
  if (command.give_input) {  // fits the pipe's buffer: written at once, then EOF
    ::fcntl(in_write.get(), F_SETFL, O_NONBLOCK);
    (void)!::write(in_write.get(), command.input.data(), command.input.size());
    in_write = unique_fd();
  }
  // Our own child: its pidfd says when it exits, whatever its descendants keep open.
  const unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, child, 0)));
  if (out_read) ::fcntl(out_read.get(), F_SETFL, O_NONBLOCK);
  const auto deadline = std::chrono::steady_clock::now() + command.timeout;
  int status = 0;
  bool exited = false;
  while (!(exited = ::waitpid(child, &status, WNOHANG) == child)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd fds[2] = {{pidfd.get(), POLLIN, 0}, {out_read.get(), POLLIN, 0}};
    // Without a pidfd (a kernel before 5.3) the wait polls every 10 ms.
    const int wait_ms = pidfd ? static_cast<int>(std::min<long long>(left.count(), 1000)) : 10;
    const int ready = ::poll(pidfd ? fds : fds + 1, (pidfd ? 1 : 0) + (out_read ? 1 : 0), wait_ms);
    if (ready < 0 && errno != EINTR) break;
    if (out_read && !drain(out_read.get(), run.output, command.max_output_bytes)) out_read = unique_fd();
  }
  if (!exited) {
    // The leader is not reaped: its PID, and so its group's ID, cannot have been reused.
    ::kill(-child, SIGKILL);
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    run.outcome = TimedOutcome::TimedOut;
  } else if (WIFSIGNALED(status)) {
    run.outcome = TimedOutcome::Signalled;
    run.signal = WTERMSIG(status);
  } else {
    run.outcome = TimedOutcome::Exited;
    run.exit_status = WEXITSTATUS(status);
  }
  if (out_read) (void)drain(out_read.get(), run.output, command.max_output_bytes);  // its last words
  return run;
}

std::string describe_timed_run(const TimedRun& run, std::chrono::milliseconds timeout) {
  switch (run.outcome) {
    case TimedOutcome::NotStarted: return run.error;
    case TimedOutcome::Exited: return fmt::format("exit status {}", run.exit_status);
    case TimedOutcome::Signalled: return fmt::format("killed by signal {}", run.signal);
    case TimedOutcome::TimedOut:
      return fmt::format("did not finish within {:g} s and was killed (its process group too)",
                         std::chrono::duration<double>(timeout).count());
  }
  return {};
}

}  // namespace gpureap
