#include "spawn/descendant_sweep.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace gpureap::spawn_child {
namespace {

// SIGKILL to each child listed; false when the list cannot be read.
bool kill_listed_children(const char* path) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buffer[4096];
  long pid = 0;
  bool in_number = false;
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      const char c = buffer[i];
      if (c >= '0' && c <= '9') {
        pid = pid * 10 + (c - '0');
        in_number = true;
      } else {
        if (in_number && pid > 1) ::kill(static_cast<pid_t>(pid), SIGKILL);
        pid = 0;
        in_number = false;
      }
    }
  }
  if (in_number && pid > 1) ::kill(static_cast<pid_t>(pid), SIGKILL);
  ::close(fd);
  return true;
}

}  // namespace

bool end_all_children() {
  // This thread's children (the keeper has one thread), named whatever PID namespace /proc is of.
  const char* path = "/proc/thread-self/children";
  for (;;) {
    if (!kill_listed_children(path)) {
      while (::waitpid(-1, nullptr, WNOHANG | __WALL) > 0) {
      }
      return false;
    }
    // Every child listed is dying: this returns at once with one of them, or says none is left.
    if (::waitpid(-1, nullptr, __WALL) < 0 && errno == ECHILD) return true;
  }
}

}  // namespace gpureap::spawn_child
