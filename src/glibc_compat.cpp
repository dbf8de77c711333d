// What the release program needs from a C library newer than the one it links against
// (GPUREAP_GLIBC_SYSROOT: Debian 11's glibc 2.31, so that it runs on glibc 2.28 and later,
// RHEL 8's). Our code, compiled with Debian 12's headers, and gcc 12's static libstdc++ and
// libxcrypt, built against glibc 2.36, name a few of its newer symbols; each is defined here,
// in the program, where the linker binds those references before it looks at the C library.
// Where the running C library has the function, it is called; otherwise a stand-in does the
// same. Linked only into that build (CMakeLists.txt, gpureap_link_for_glibc_floor).
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "realtime_cond_wait.hpp"

namespace {

using ClockWait = int (*)(pthread_cond_t*, pthread_mutex_t*, clockid_t, const struct timespec*);
using Fork = pid_t (*)();
using SignalAbbreviation = const char* (*)(int);

// The running C library's own functions, looked up once before main while one thread runs:
// _Fork is called in a child of a threaded process, where the loader's lock may be held.
struct Natives {
  ClockWait clockwait = nullptr;
  Fork fork = nullptr;
  SignalAbbreviation sigabbrev = nullptr;
};
Natives natives;

__attribute__((constructor)) void find_natives() {
  natives.clockwait = reinterpret_cast<ClockWait>(::dlvsym(RTLD_NEXT, "pthread_cond_clockwait", "GLIBC_2.30"));
  natives.fork = reinterpret_cast<Fork>(::dlvsym(RTLD_NEXT, "_Fork", "GLIBC_2.34"));
  natives.sigabbrev = reinterpret_cast<SignalAbbreviation>(::dlvsym(RTLD_NEXT, "sigabbrev_np", "GLIBC_2.32"));
}

// glibc's abbreviations of Linux's standard signals (sigabbrev_np), by number.
constexpr const char* kSignalAbbreviations[] = {
    nullptr, "HUP",  "INT",  "QUIT", "ILL",  "TRAP", "ABRT", "BUS",  "FPE",    "KILL", "USR1",
    "SEGV",  "USR2", "PIPE", "ALRM", "TERM", "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN",
    "TTOU",  "URG",  "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "POLL", "PWR", "SYS"};

}  // namespace

// Hidden: bound inside the program alone. Exported, they would take the place of the C
// library's own for every library loaded later (NVML, the HTTP module's libstdc++).
#define GPUREAP_STAND_IN __attribute__((visibility("hidden")))

extern "C" {

// glibc 2.32: libstdc++ skips atomic reference counts when this says one thread. Always
// "more than one": correct everywhere, at the cost of atomics in a single-threaded program.
GPUREAP_STAND_IN char __libc_single_threaded = 0;

// glibc 2.36: std::random_device's default source (libstdc++'s random.o, which its exception
// classes pull in) and libxcrypt's salts. The kernel's generator, as glibc's own.
GPUREAP_STAND_IN void arc4random_buf(void* buffer, size_t size) noexcept {
  auto* out = static_cast<char*>(buffer);
  while (size > 0) {
    const ssize_t got = ::getrandom(out, size, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::abort();  // arc4random cannot fail; getrandom fails only on a kernel without it (before 3.17)
    }
    out += got;
    size -= static_cast<size_t>(got);
  }
}

GPUREAP_STAND_IN uint32_t arc4random() noexcept {
  uint32_t value = 0;
  arc4random_buf(&value, sizeof value);
  return value;
}

// glibc 2.30: std::condition_variable's waits on steady_clock (top, watch, export, fleet).
GPUREAP_STAND_IN int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock,
                                            const struct timespec* deadline) {
  if (natives.clockwait != nullptr) return natives.clockwait(cond, mutex, clock, deadline);
  return gpureap::cond_wait_on_realtime(cond, mutex, clock, deadline);
}

// glibc 2.34: fork without the fork handlers (spawn's keeper). Before it, fork, as
// process_start.cpp does where it is compiled against such a C library.
GPUREAP_STAND_IN pid_t _Fork() noexcept {
  return natives.fork != nullptr ? natives.fork() : ::fork();
}

// glibc 2.32: signal names (text/signal_names.cpp).
GPUREAP_STAND_IN const char* sigabbrev_np(int signal) noexcept {
  if (natives.sigabbrev != nullptr) return natives.sigabbrev(signal);
  constexpr int known = static_cast<int>(sizeof kSignalAbbreviations / sizeof kSignalAbbreviations[0]);
  return signal > 0 && signal < known ? kSignalAbbreviations[signal] : nullptr;
}

// glibc 2.30: /proc read in batches (proc/proc_io.cpp). The wrapper is the system call itself.
GPUREAP_STAND_IN ssize_t getdents64(int fd, void* buffer, size_t size) noexcept {
  return ::syscall(SYS_getdents64, fd, buffer, size);
}

}  // extern "C"
