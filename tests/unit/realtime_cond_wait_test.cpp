// The release program's pthread_cond_clockwait on a C library without one (before glibc 2.30,
// RHEL 8): a wait on steady_clock's deadline, measured on the wall clock.
#include "realtime_cond_wait.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <cerrno>
#include <chrono>
#include <thread>

namespace gpureap {
namespace {

using std::chrono::steady_clock;

timespec monotonic_in(std::chrono::milliseconds span) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  const long long ns = now.tv_nsec + static_cast<long long>(span.count()) * 1'000'000LL;
  return timespec{now.tv_sec + static_cast<time_t>(ns / 1'000'000'000LL), static_cast<long>(ns % 1'000'000'000LL)};
}

struct Waiter {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  bool woken = false;
};

TEST(RealtimeCondWait, TimesOutAtTheMonotonicDeadline) {
  Waiter w;
  const timespec deadline = monotonic_in(std::chrono::milliseconds(200));
  const auto start = steady_clock::now();
  ASSERT_EQ(::pthread_mutex_lock(&w.mutex), 0);
  int status = 0;
  do {  // a spurious wake-up waits again, as std::condition_variable's callers do
    status = cond_wait_on_realtime(&w.cond, &w.mutex, CLOCK_MONOTONIC, &deadline);
  } while (status == 0);
  ::pthread_mutex_unlock(&w.mutex);
  const auto waited = steady_clock::now() - start;
  EXPECT_EQ(status, ETIMEDOUT);
  EXPECT_GE(waited, std::chrono::milliseconds(190));  // (the two clocks read a few µs apart)
  EXPECT_LT(waited, std::chrono::seconds(5));
}

TEST(RealtimeCondWait, ReturnsWhenSignalledBeforeTheDeadline) {
  Waiter w;
  const timespec deadline = monotonic_in(std::chrono::seconds(30));
  const auto start = steady_clock::now();
  ASSERT_EQ(::pthread_mutex_lock(&w.mutex), 0);
  std::thread signaller([&w] {
    ::pthread_mutex_lock(&w.mutex);  // held by the waiter until it waits: the signal cannot be lost
    w.woken = true;
    ::pthread_cond_signal(&w.cond);
    ::pthread_mutex_unlock(&w.mutex);
  });
  int status = 0;
  while (!w.woken && status == 0) status = cond_wait_on_realtime(&w.cond, &w.mutex, CLOCK_MONOTONIC, &deadline);
  ::pthread_mutex_unlock(&w.mutex);
  signaller.join();
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(w.woken);
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(RealtimeCondWait, RefusesOtherClocksAndMalformedDeadlinesAndReportsAPassedOne) {
  Waiter w;
  ASSERT_EQ(::pthread_mutex_lock(&w.mutex), 0);
  const timespec later = monotonic_in(std::chrono::seconds(30));
  EXPECT_EQ(cond_wait_on_realtime(&w.cond, &w.mutex, CLOCK_PROCESS_CPUTIME_ID, &later), EINVAL);
  const timespec malformed{later.tv_sec, 1'000'000'000L};
  EXPECT_EQ(cond_wait_on_realtime(&w.cond, &w.mutex, CLOCK_MONOTONIC, &malformed), EINVAL);
  const timespec passed{1, 0};  // the first second after boot
  EXPECT_EQ(cond_wait_on_realtime(&w.cond, &w.mutex, CLOCK_MONOTONIC, &passed), ETIMEDOUT);
  ::pthread_mutex_unlock(&w.mutex);
}

}  // namespace
}  // namespace gpureap
