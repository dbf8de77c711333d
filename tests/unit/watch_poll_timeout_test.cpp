// The loop's poll sleeps until its deadline in one call, however close the deadline is.
#include <gtest/gtest.h>

#include <poll.h>

#include <chrono>

#include "watch/poll_timeout.hpp"

namespace gpureap {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(WatchPollTimeout, OnePollSleepsPastADeadlineEvenUnderAMillisecondAway) {
  for (const auto away : {100us, 500us, 900us, 1500us, 3000us}) {
    const auto deadline = Clock::now() + away;
    int polls = 0;
    while (Clock::now() < deadline) {
      ++polls;
      ASSERT_EQ(::poll(nullptr, 0, static_cast<int>(poll_timeout<Clock>(deadline, Clock::now()).count())), 0);
    }
    EXPECT_EQ(polls, 1) << "a deadline " << away.count() << " us away";
  }
}

TEST(WatchPollTimeout, ADeadlinePassedDoesNotWait) {
  const auto now = Clock::now();
  EXPECT_EQ(poll_timeout<Clock>(now - 5ms, now), 0ms);
  EXPECT_EQ(poll_timeout<Clock>(now, now), 0ms);
  EXPECT_EQ(poll_timeout<Clock>(now + 2ms, now), 2ms);
}

}  // namespace
}  // namespace gpureap
