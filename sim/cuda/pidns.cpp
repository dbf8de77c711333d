#include "cuda/pidns.hpp"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/signals.hpp"

namespace gpusim::cuda {

namespace {

volatile sig_atomic_t g_inner_pid = 0;

void forward(int sig) {
  int saved = errno;
  if (g_inner_pid > 0) ::kill(static_cast<pid_t>(g_inner_pid), sig);
  errno = saved;
}

[[noreturn]] void wait_and_mirror(pid_t inner) {
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(inner, &status, 0);
    if (r == inner) break;
    if (r < 0 && errno != EINTR) std::_Exit(1);
  }
  if (WIFEXITED(status)) std::_Exit(WEXITSTATUS(status));
  die_of_signal(WTERMSIG(status));
}

}  // namespace

Status enter_pid_namespace() {
  if (::unshare(CLONE_NEWPID) != 0) {
    return Error{std::string("unshare(CLONE_NEWPID): ") + std::strerror(errno)};
  }
  // Install the forwarders before fork so no early signal is lost.
  struct sigaction sa {};
  sa.sa_handler = forward;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  // Blocked until the launcher knows the inner PID: on a loaded host the child can be ready
  // (and signalled through us) before the parent runs again, and a forwarder that does not
  // know whom to forward to would drop the signal.
  sigset_t forwarded, previous;
  sigemptyset(&forwarded);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&forwarded, sig);
  ::sigprocmask(SIG_BLOCK, &forwarded, &previous);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Error{std::string("fork into the new PID namespace: ") + std::strerror(errno)};
  if (pid == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &dfl, nullptr);
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    return ok_status();
  }
  g_inner_pid = pid;
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);  // a signal that came meanwhile is forwarded now
  wait_and_mirror(pid);
}

}  // namespace gpusim::cuda
