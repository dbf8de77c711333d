// The timeout a poll() is given to sleep until a deadline: whole milliseconds, rounded up. Cut
// down instead, the last fraction of a millisecond before each deadline polls with 0 and comes
// straight back, again and again until the deadline passes: a loop woken every second (and by
// each event gap) spun there for up to a millisecond each time.
#pragma once

#include <chrono>

namespace gpureap {

template <class Clock>
std::chrono::milliseconds poll_timeout(typename Clock::time_point deadline, typename Clock::time_point now) {
  if (deadline <= now) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
}

}  // namespace gpureap
