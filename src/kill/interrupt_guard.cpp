#include "kill/interrupt_guard.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace gpureap {
namespace {

// The handler's only state (lock-free atomics are async-signal-safe): the first signal, and
// the pipe that wakes a poll().
std::atomic<int> g_write_end{-1};
std::atomic<int> g_first_signal{0};

extern "C" void record_signal(int sig) {
  const int saved = errno;
  int none = 0;
  g_first_signal.compare_exchange_strong(none, sig);
  const int fd = g_write_end.load();
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(sig);
    (void)!::write(fd, &byte, 1);
  }
  errno = saved;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    read_end_ = procfs::unique_fd(fds[0]);
    write_end_ = procfs::unique_fd(fds[1]);
  }
  g_first_signal.store(0);
  g_write_end.store(write_end_.get());
  for (std::size_t i = 0; i < kSignals.size(); ++i) {
    struct sigaction action {};
    ::sigaction(kSignals[i], nullptr, &previous_[i]);
    // An ignored signal stays ignored (nohup, a background job of a script): it was never
    // going to end gpureap, so it must not stop the ladder either.
    if (previous_[i].sa_handler == SIG_IGN && (previous_[i].sa_flags & SA_SIGINFO) == 0) continue;
    action.sa_handler = record_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(kSignals[i], &action, nullptr);
  }
}

InterruptGuard::~InterruptGuard() {
  for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  g_write_end.store(-1);
}

int InterruptGuard::received() {
  unsigned char byte = 0;
  while (read_end_ && ::read(read_end_.get(), &byte, 1) == 1) {
  }
  return g_first_signal.load();
}

InterruptRequest::InterruptRequest() {
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
    read_end_ = procfs::unique_fd(fds[0]);
    write_end_ = procfs::unique_fd(fds[1]);
  }
}

void InterruptRequest::request(int signal) {
  int none = 0;
  signal_.compare_exchange_strong(none, signal != 0 ? signal : SIGTERM);
  // Never drained: the ladder's poll stays woken, and received() says why.
  const unsigned char byte = 1;
  if (write_end_) (void)!::write(write_end_.get(), &byte, 1);
}

}  // namespace gpureap
