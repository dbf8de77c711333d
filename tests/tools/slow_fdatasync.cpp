// LD_PRELOAD library for the signal-safety tests: every fdatasync() takes
// GPUREAP_TEST_FDATASYNC_MS milliseconds longer (default 30), like an audit log on a slow or
// busy disk, so that a ladder's stop window is wide enough to be hit by a signal.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

extern "C" int fdatasync(int fd) {
  long ms = 30;
  if (const char* text = std::getenv("GPUREAP_TEST_FDATASYNC_MS"); text != nullptr) ms = std::strtol(text, nullptr, 10);
  timespec delay{ms / 1000, (ms % 1000) * 1000000L};
  while (::nanosleep(&delay, &delay) != 0 && errno == EINTR) {
  }
  return static_cast<int>(::syscall(SYS_fdatasync, fd));
}
