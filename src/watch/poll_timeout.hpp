// The timeout a poll() is given to sleep until a deadline: whole milliseconds, rounded up. Cut
// down instead, the last fraction of a millisecond before each deadline would poll with 0 and
// come straight back, again and again until the deadline passes: a spin of up to a millisecond
// before every look and every event gap.
#pragma once

#include <chrono>

namespace gpureap {

template <class Clock>
std::chrono::milliseconds poll_timeout(typename Clock::time_point deadline, typename Clock::time_point now) {
  if (deadline <= now) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
}

}  // namespace gpureap
