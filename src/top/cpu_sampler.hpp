// CPU use between two refreshes, from each process's utime + stime: what `top` shows, rather
// than the lifetime average /proc gives at one look.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <utility>

#include <sys/types.h>

#include "proc/process_info.hpp"

namespace gpureap {

class CpuSampler {
 public:
  // Percent of one core since this process (PID and start time) was last sampled; on first
  // sight, its lifetime average.
  double sample(const ProcessInfo& process, std::chrono::steady_clock::time_point now);
  // Forgets the processes not sampled since the last call (they exited or left the view).
  void end_round();

 private:
  struct Last {
    double cpu_seconds = 0;
    std::chrono::steady_clock::time_point at;
    double percent = 0;
    bool seen = false;  // in the current round
  };
  std::map<std::pair<pid_t, std::uint64_t>, Last> last_;
};

}  // namespace gpureap
