// A job for `gpureap run`'s tests: forks N "ranks" and, in every process, appends one line
// "<pid> <signal number>" to FILE for each SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
// SIGTSTP, SIGCONT or SIGWINCH
// it receives. Prints "READY <main pid> <rank pids...>" once everything is listening.
// The main process exits 0 on --exit-on SIG (a number); the ranks never exit by themselves.
//   signal-recorder FILE RANKS EXIT_ON_SIGNAL
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_file = -1;
volatile sig_atomic_t g_exit = 0;
int g_exit_on = 0;

void record(int sig) {
  char line[64];
  const int n = std::snprintf(line, sizeof line, "%d %d\n", static_cast<int>(getpid()), sig);
  if (n > 0) [[maybe_unused]] auto w = write(g_file, line, static_cast<size_t>(n));
  if (sig == g_exit_on) g_exit = 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: signal-recorder FILE RANKS EXIT_ON_SIGNAL\n");
    return 2;
  }
  g_file = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (g_file < 0) return 1;
  const int ranks = std::atoi(argv[2]);
  const int exit_on = std::atoi(argv[3]);
  struct sigaction sa {};
  sa.sa_handler = record;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGCONT, SIGWINCH}) {
    sigaction(sig, &sa, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  std::vector<pid_t> children;
  for (int i = 0; i < ranks; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      for (;;) pause();  // a rank: records, never exits by itself
    }
    children.push_back(pid);
  }
  std::string ready = "READY " + std::to_string(getpid());
  for (pid_t c : children) ready += " " + std::to_string(c);
  ready += "\n";
  [[maybe_unused]] auto w = write(STDOUT_FILENO, ready.data(), ready.size());
  g_exit_on = exit_on;
  while (!g_exit) pause();
  return 0;
}
