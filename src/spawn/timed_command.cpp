#include "spawn/timed_command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "proc/proc_io.hpp"
#include "spawn/spawn_hygiene.hpp"

namespace gpureap {
namespace {

using procfs::unique_fd;

// How long past its deadline the keeper may take to end what the program started (a process
// in uninterruptible sleep dies only when it leaves the kernel) before it is killed itself.
constexpr std::chrono::seconds kKeeperGrace{2};

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

std::vector<std::string> helper_environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (const char* entry : kHelperEnvironment) {
    const std::string_view text(entry);
    const bool replaced = std::any_of(extra.begin(), extra.end(), [&](const std::string& x) {
      const auto eq = x.find('=');
      return eq != std::string::npos && text.substr(0, eq + 1) == std::string_view(x).substr(0, eq + 1);
    });
    if (!replaced) env.emplace_back(text);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

// The name of an open file, for messages: where /proc says it is.
std::string name_of(int fd, const std::string& fallback) {
  char target[4096];
  const ssize_t n = ::readlink(fmt::format("/proc/self/fd/{}", fd).c_str(), target, sizeof target - 1);
  return n > 0 ? std::string(target, static_cast<std::size_t>(n)) : fallback;
}

// The program to run, as an open file: the caller's, checked, or found on PATH and opened.
struct ProgramToRun {
  unique_fd opened;  // held while the program runs, when we opened it
  int fd = -1;
  std::string name;
  std::string problem;  // why it cannot run; empty when it can
};

ProgramToRun program_to_run(const TimedCommand& command) {
  ProgramToRun program;
  if (command.program_fd >= 0) {
    program.fd = command.program_fd;
    program.name = name_of(program.fd, command.argv.front());
    program.problem = program_file_problem(program.fd, program.name);
    return program;
  }
  program.name = find_executable(command.argv.front());
  if (program.name.empty()) {
    program.problem = command.argv.front().find('/') == std::string::npos
                          ? fmt::format("{} is not installed (no absolute PATH entry holds it)", command.argv.front())
                          : fmt::format("{} is not an executable file given by its absolute path", command.argv.front());
    return program;
  }
  program.opened = open_program(program.name, program.problem);
  program.fd = program.opened.get();
  return program;
}

// Waits for the keeper, draining the output as it comes; past the backstop the keeper is
// killed and reaped. True when it had to be (the run is lost).
bool wait_for_keeper(const KeptProgram& kept, std::chrono::steady_clock::time_point backstop, unique_fd& out_read,
                     const TimedCommand& command, std::string& output) {
  for (;;) {
    if (::waitpid(kept.keeper, nullptr, WNOHANG) == kept.keeper) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(backstop - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(kept.keeper, SIGKILL);  // not reaped yet: the PID is still the keeper's
      while (::waitpid(kept.keeper, nullptr, 0) < 0 && errno == EINTR) {
      }
      return true;
    }
    const int pidfd = kept.keeper_pidfd.get();
    pollfd fds[2] = {{pidfd, POLLIN, 0}, {out_read.get(), POLLIN, 0}};
    // Without a pidfd (a kernel before 5.3) the wait polls every 10 ms.
    const int wait_ms = pidfd >= 0 ? static_cast<int>(std::min<long long>(left.count(), 1000)) : 10;
    const int ready = ::poll(pidfd >= 0 ? fds : fds + 1, (pidfd >= 0 ? 1 : 0) + (out_read ? 1 : 0), wait_ms);
    if (ready < 0 && errno != EINTR) ::usleep(10000);
    if (out_read && !drain(out_read.get(), output, command.max_output_bytes)) out_read = unique_fd();
  }
}

// The keeper's report as the run's outcome; a lost keeper counts as timed out.
TimedRun finished_run(TimedRun run, const KeptEnd& end, bool lost, const std::string& program) {
  run.descendants_may_remain = lost || !end.descendants_ended;
  switch (lost ? KeptOutcome::Lost : end.outcome) {
    case KeptOutcome::NotStarted: {
      TimedRun failed = not_started(fmt::format("cannot run {}: {}: {}", program, start_stage_words(end.failed_at),
                                                std::strerror(end.error)));
      failed.program = program;
      return failed;
    }
    case KeptOutcome::Exited:
      run.outcome = TimedOutcome::Exited;
      run.exit_status = end.exit_status;
      break;
    case KeptOutcome::Signalled:
      run.outcome = TimedOutcome::Signalled;
      run.signal = end.signal;
      break;
    case KeptOutcome::TimedOut:
    case KeptOutcome::Lost: run.outcome = TimedOutcome::TimedOut; break;
  }
  return run;
}

}  // namespace

TimedRun run_timed_command(const TimedCommand& command) {
  if (command.argv.empty()) return not_started("no command");
  const ProgramToRun resolved = program_to_run(command);
  if (!resolved.problem.empty()) return not_started(resolved.problem);
  const std::string& program = resolved.name;
  if (command.run_as && command.run_as->groups.size() > static_cast<std::size_t>(spawn_child::kMaxGroups)) {
    return not_started(fmt::format("cannot run {}: more than {} supplementary groups", program, spawn_child::kMaxGroups));
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if (command.give_input && ::pipe2(in, O_CLOEXEC) != 0) return not_started(std::string("pipe: ") + std::strerror(errno));
  unique_fd in_read(in[0]), in_write(in[1]);
  const bool capture = command.output == TimedCommand::Output::Capture;
  if (capture && ::pipe2(out, O_CLOEXEC) != 0) return not_started(std::string("pipe: ") + std::strerror(errno));
  unique_fd out_read(out[0]), out_write(out[1]);
  const int sink = capture ? out_write.get() : command.output_fd;
  if (sink < 0) return not_started("no output file");
  unique_fd null_in, null_out;
  if (!command.give_input) null_in = unique_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (capture && command.capture_stderr_only) null_out = unique_fd(::open("/dev/null", O_WRONLY | O_CLOEXEC));

  StartRequest request;
  request.argv = command.argv;
  request.program_fd = resolved.fd;
  request.environment = helper_environment(command.extra_env);
  request.stdin_fd = command.give_input ? in_read.get() : null_in.get();
  request.stdout_fd = null_out ? null_out.get() : sink;
  request.stderr_fd = sink;
  request.run_as = command.run_as;
  const auto deadline = std::chrono::steady_clock::now() + command.timeout;
  KeptProgram kept = start_kept(request, deadline);
  in_read = unique_fd();
  out_write = unique_fd();
  if (kept.failed_at != StartStage::None) {
    return not_started(fmt::format("cannot run {}: {}", program, std::strerror(kept.error)));
  }

  TimedRun run;
  run.program = program;
  if (command.give_input) {  // fits the pipe's buffer: written at once, then EOF
    ::fcntl(in_write.get(), F_SETFL, O_NONBLOCK);
    (void)!::write(in_write.get(), command.input.data(), command.input.size());
    in_write = unique_fd();
  }
  if (out_read) ::fcntl(out_read.get(), F_SETFL, O_NONBLOCK);
  // The keeper keeps the deadline; this one only bounds the keeper.
  const bool lost = wait_for_keeper(kept, deadline + kKeeperGrace, out_read, command, run.output);
  if (out_read) (void)drain(out_read.get(), run.output, command.max_output_bytes);  // its last words
  const KeptEnd end = read_keeper_report(kept.report.get());
  return finished_run(std::move(run), end, lost, program);
}

std::string describe_timed_run(const TimedRun& run, std::chrono::milliseconds timeout) {
  switch (run.outcome) {
    case TimedOutcome::NotStarted: return run.error;
    case TimedOutcome::Exited: return fmt::format("exit status {}", run.exit_status);
    case TimedOutcome::Signalled: return fmt::format("killed by signal {}", run.signal);
    case TimedOutcome::TimedOut:
      return fmt::format("did not finish within {:g} s and was killed (with everything it started)",
                         std::chrono::duration<double>(timeout).count());
  }
  return {};
}

}  // namespace gpureap
