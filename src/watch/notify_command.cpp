#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "proc/proc_io.hpp"
#include "watch/notify_channels.hpp"

extern char** environ;

namespace gpureap {
namespace {

constexpr std::size_t kMaxStderrBytes = 4096;

// The first line of what the command wrote to stderr, for the log (sanitised there).
std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return "ended";
}

}  // namespace

std::string_view delivery_outcome_name(DeliveryOutcome outcome) {
  switch (outcome) {
    case DeliveryOutcome::Sent: return "sent";
    case DeliveryOutcome::Failed: return "failed";
    case DeliveryOutcome::TimedOut: return "timeout";
  }
  return "failed";
}

Delivery run_notify_command(const std::vector<std::string>& argv, const std::string& json,
                            std::chrono::milliseconds timeout) {
  Delivery result;
  int in[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) return {DeliveryOutcome::Failed, std::string("pipe: ") + std::strerror(errno)};
  procfs::unique_fd in_read(in[0]), in_write(in[1]);
  if (pipe2(err, O_CLOEXEC) != 0) return {DeliveryOutcome::Failed, std::string("pipe: ") + std::strerror(errno)};
  procfs::unique_fd err_read(err[0]), err_write(err[1]);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, in_read.get(), STDIN_FILENO);
  posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&files, err_write.get(), STDERR_FILENO);
  // The daemon blocks its signals (a signalfd reads them) and ignores SIGPIPE: the command
  // starts with neither.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t child = -1;
  const int spawned = posix_spawn(&child, args[0], &files, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  in_read = procfs::unique_fd();
  err_write = procfs::unique_fd();
  if (spawned != 0) return {DeliveryOutcome::Failed, fmt::format("cannot run {}: {}", argv[0], std::strerror(spawned))};

  // The body fits the pipe's buffer (watch_event_json bounds it): written at once, then EOF.
  fcntl(in_write.get(), F_SETFL, O_NONBLOCK);
  (void)!::write(in_write.get(), json.data(), json.size());
  in_write = procfs::unique_fd();

  // Our own child: its pidfd says when it exits, whatever its descendants keep open.
  procfs::unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, child, 0)));
  fcntl(err_read.get(), F_SETFL, O_NONBLOCK);
  std::string stderr_text;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  bool exited = false;
  while (!exited) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd fds[2] = {{pidfd.get(), POLLIN, 0}, {err_read.get(), POLLIN, 0}};
    const int ready = ::poll(fds, err_read ? 2 : 1, pidfd ? static_cast<int>(std::min<long long>(left.count(), 1000)) : 10);
    if (ready < 0 && errno != EINTR) break;
    if (err_read && (fds[1].revents & (POLLIN | POLLHUP)) != 0) {
      char buffer[1024];
      const ssize_t n = ::read(err_read.get(), buffer, sizeof buffer);
      if (n > 0 && stderr_text.size() < kMaxStderrBytes) stderr_text.append(buffer, static_cast<std::size_t>(n));
      if (n == 0) err_read = procfs::unique_fd();
    }
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    exited = done == child;
  }
  if (!exited) {
    ::kill(child, SIGKILL);
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return {DeliveryOutcome::TimedOut,
            fmt::format("{} did not finish within {} ms and was killed", argv[0], timeout.count())};
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {DeliveryOutcome::Sent, ""};
  const std::string said = first_line(stderr_text);
  return {DeliveryOutcome::Failed, describe_status(status) + (said.empty() ? "" : ": " + said)};
}

}  // namespace gpureap
