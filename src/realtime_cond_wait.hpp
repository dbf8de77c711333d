// A condition variable wait until a deadline on any clock, for C libraries without
// pthread_cond_clockwait (before glibc 2.30): the release program's stand-in (glibc_compat.cpp).
#pragma once

#include <pthread.h>
#include <time.h>

namespace gpureap {

// pthread_cond_clockwait (glibc 2.30) on a C library without it: waits on `cond` until
// `deadline` on `clock` (CLOCK_MONOTONIC or CLOCK_REALTIME), measured as the same span on the
// wall clock. 0 when woken, ETIMEDOUT when the deadline passed, EINVAL for another clock or a
// malformed deadline.
int cond_wait_on_realtime(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock, const timespec* deadline);

}  // namespace gpureap
