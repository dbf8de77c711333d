// Real child processes for the kill engine's tests: forked, in their own process group,
// ready only after they have set themselves up, always reaped.
#pragma once

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kill/pid_ref.hpp"
#include "proc/pid_files.hpp"
#include "signals_settled.hpp"

namespace gpureap::killtest {

// Forks a child in its own process group that runs body(ready_fd): the body writes one byte
// to ready_fd when set up. Returns the child's PID once that byte arrived (-1 on failure).
inline pid_t spawn(const std::function<void(int ready_fd)>& body) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::close(fds[0]);
    ::setpgid(0, 0);
    body(fds[1]);
    ::_exit(0);
  }
  ::close(fds[1]);
  char byte = 0;
  ssize_t got;
  do {
    got = ::read(fds[0], &byte, 1);
  } while (got < 0 && errno == EINTR);
  ::close(fds[0]);
  return got == 1 ? pid : -1;
}

inline void ready(int fd) {
  const char byte = 'r';
  (void)!::write(fd, &byte, 1);
  ::close(fd);
}

[[noreturn]] inline void pause_forever() {
  for (;;) ::pause();
}

inline char state_of(pid_t pid) {
  const auto stat = procfs::read_stat("/proc", pid);
  return stat ? stat->state : '-';
}

// Polls /proc until pid is in `state` (or 2 s pass). Test-side only.
inline bool wait_for_state(pid_t pid, char state) {
  for (int i = 0; i < 2000; ++i) {
    if (state_of(pid) == state) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

inline std::uint64_t start_ticks(pid_t pid) {
  const auto stat = procfs::read_stat("/proc", pid);
  return stat ? stat->start_time_ticks : 0;
}

inline PidRef pin_or_die(pid_t pid) {
  PinResult pinned = PidRef::pin(pid, start_ticks(pid));
  return std::move(pinned.ref);
}

// Whether our child pid is still running (not exited; not reaped).
inline bool alive(pid_t pid) {
  const char state = state_of(pid);
  return state != '-' && state != 'Z' && state != 'X';
}

// Reaps pid, killing it first if it still runs. Returns its wait status.
inline int reap(pid_t pid, bool kill_first = true) {
  if (pid <= 0) return 0;
  if (kill_first && alive(pid)) {
    ::kill(pid, SIGKILL);
    ::kill(pid, SIGCONT);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace gpureap::killtest
