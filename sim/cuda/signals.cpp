#include "cuda/signals.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace gpusim::cuda {

namespace {

void ignore_handler(int) {}

constexpr int kTermSignals[] = {SIGTERM, SIGINT, SIGHUP};

sigset_t waited_set(TermPolicy policy) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  if (policy.kind != TermPolicy::Ignore) {
    for (int sig : kTermSignals) sigaddset(&set, sig);
  }
  return set;
}

void sleep_ms(unsigned ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

}  // namespace

std::int64_t monotonic_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void die_of_signal(int sig) {
  ::signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::sigprocmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  std::_Exit(128 + sig);
}

void install_signal_policy(TermPolicy on_sigterm) {
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_sigterm.kind == TermPolicy::Ignore ? SIG_IGN : ignore_handler;
  for (int sig : kTermSignals) ::sigaction(sig, &sa, nullptr);
  // SIGCHLD keeps a handler (not SIG_IGN), or the kernel would reap zombies for us.
  sa.sa_handler = ignore_handler;
  ::sigaction(SIGCHLD, &sa, nullptr);
  sigset_t set = waited_set(on_sigterm);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
}

int idle_until_done(TermPolicy on_sigterm, std::optional<std::uint64_t> exit_after_ms, std::vector<pid_t>& children) {
  sigset_t set = waited_set(on_sigterm);
  std::int64_t deadline = exit_after_ms ? monotonic_ms() + static_cast<std::int64_t>(*exit_after_ms) : 0;
  for (;;) {
    int sig;
    if (exit_after_ms) {
      std::int64_t left = deadline - monotonic_ms();
      if (left <= 0) return kExitOk;
      timespec ts{static_cast<time_t>(left / 1000), static_cast<long>(left % 1000) * 1000000L};
      sig = ::sigtimedwait(&set, nullptr, &ts);
      if (sig < 0) continue;  // EAGAIN at the deadline (checked above) or EINTR
    } else {
      sig = ::sigwaitinfo(&set, nullptr);
      if (sig < 0) continue;
    }
    if (sig == SIGCHLD) {
      std::erase_if(children, [](pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) == pid; });
      continue;
    }
    // A termination signal under the exit or slow policy.
    if (on_sigterm.kind == TermPolicy::Slow) sleep_ms(on_sigterm.slow_ms);
    return kExitOk;
  }
}

}  // namespace gpusim::cuda
