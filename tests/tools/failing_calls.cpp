// LD_PRELOAD library for `gpureap run`'s start and wait-loop tests: a call the kernel rarely
// fails, failed on purpose.
//   GPUREAP_TEST_SIGNALFD_ERRNO=N  every signalfd() fails with errno N (EMFILE: no descriptor left)
//   GPUREAP_TEST_POLL_FAILURES=K   the first K poll()s over four descriptors (run's wait for a
//                                  signal, an exit event or a holder event) fail with ENOMEM
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

namespace {

long from_environment(const char* name) {
  const char* text = std::getenv(name);
  return text == nullptr ? 0 : std::strtol(text, nullptr, 10);
}

std::atomic<long> polls_failed{0};

}  // namespace

extern "C" int signalfd(int fd, const sigset_t* mask, int flags) {
  if (const long error = from_environment("GPUREAP_TEST_SIGNALFD_ERRNO"); error > 0) {
    errno = static_cast<int>(error);
    return -1;
  }
  // The kernel's sigset is 8 bytes on Linux, whatever glibc's sigset_t holds.
  return static_cast<int>(::syscall(SYS_signalfd4, fd, mask, 8, flags));
}

extern "C" int poll(pollfd* fds, nfds_t nfds, int timeout) {
  if (nfds == 4 && polls_failed.load() < from_environment("GPUREAP_TEST_POLL_FAILURES")) {
    ++polls_failed;
    errno = ENOMEM;
    return -1;
  }
  timespec limit{timeout / 1000, (timeout % 1000) * 1000000L};
  return static_cast<int>(::syscall(SYS_ppoll, fds, nfds, timeout < 0 ? nullptr : &limit, nullptr, 8));
}
