// Wall-clock time shared by every process of the simulation (release stamps, samples).
#pragma once

#include <cstdint>
#include <ctime>

namespace gpusim {

inline std::int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace gpusim
