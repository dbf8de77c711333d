#include "terminal_run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace gpureap::test {

TerminalResult run_on_terminal(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                               unsigned short columns, const std::string& input, int timeout_ms) {
  termios mode{};
  cfmakeraw(&mode);
  mode.c_lflag |= ICANON;  // line input, so a prompt reads "n\n" as one answer; no echo, no \r\n
  mode.c_cc[VMIN] = 1;
  winsize size{};
  size.ws_row = 40;
  size.ws_col = columns;
  int master = -1, slave = -1;
  if (openpty(&master, &slave, nullptr, &mode, &size) != 0) throw std::runtime_error("openpty");
  int err_pipe[2];
  if (pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe");

  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq != std::string::npos) merged[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  merged.erase("COLUMNS");
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  const pid_t pid = fork();
  if (pid == 0) {
    setsid();
    ioctl(slave, TIOCSCTTY, 0);
    dup2(slave, STDIN_FILENO);
    dup2(slave, STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    close(master);
    if (slave > STDERR_FILENO) close(slave);
    execve(args[0], args.data(), envp.data());
    _exit(127);
  }
  close(slave);
  close(err_pipe[1]);
  if (!input.empty() && write(master, input.data(), input.size()) < 0) throw std::runtime_error("write pty");

  TerminalResult result;
  pollfd fds[2] = {{master, POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buffer[65536];
  while (open_fds > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    if (poll(fds, 2, static_cast<int>(left)) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n <= 0) {  // EIO on the master once the last slave closes
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      (i == 0 ? result.screen : result.err).append(buffer, static_cast<std::size_t>(n));
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 500 && (done = waitpid(pid, &status, WNOHANG)) != pid; ++i) usleep(10000);
  if (done != pid) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return result;
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace gpureap::test
