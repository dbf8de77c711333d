#include "realtime_cond_wait.hpp"

#include <errno.h>

#include <cstdint>

namespace gpureap {

int cond_wait_on_realtime(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock, const timespec* deadline) {
  if (clock != CLOCK_MONOTONIC && clock != CLOCK_REALTIME) return EINVAL;
  if (deadline->tv_nsec < 0 || deadline->tv_nsec >= 1'000'000'000) return EINVAL;
  timespec now{};
  ::clock_gettime(clock, &now);
  int64_t left_ns = (deadline->tv_sec - now.tv_sec) * 1'000'000'000LL + (deadline->tv_nsec - now.tv_nsec);
  if (left_ns <= 0) return ETIMEDOUT;
  // The same span from now on the wall clock. A step of the wall clock during the wait moves
  // its end (libstdc++'s waits built without pthread_cond_clockwait do the same); the waits
  // that gpureap makes check their own deadline again when they wake.
  timespec wall{};
  ::clock_gettime(CLOCK_REALTIME, &wall);
  left_ns += wall.tv_nsec;
  wall.tv_sec += static_cast<time_t>(left_ns / 1'000'000'000LL);
  wall.tv_nsec = static_cast<long>(left_ns % 1'000'000'000LL);
  return ::pthread_cond_timedwait(cond, mutex, &wall);
}

}  // namespace gpureap
