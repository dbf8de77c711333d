#include "top/cpu_sampler.hpp"

#include <algorithm>

namespace gpureap {

double CpuSampler::sample(const ProcessInfo& process, std::chrono::steady_clock::time_point now) {
  const auto [it, first_sight] = last_.try_emplace({process.pid, process.start_time_ticks});
  Last& last = it->second;
  // A process on two GPUs has two rows: the second of one round repeats the first's figure.
  if (!first_sight && last.seen && last.at == now) return last.percent;
  double percent = process.cpu_percent;
  if (!first_sight) {
    const double elapsed = std::chrono::duration<double>(now - last.at).count();
    if (elapsed > 0) percent = std::max(0.0, process.cpu_seconds - last.cpu_seconds) / elapsed * 100.0;
  }
  last = Last{process.cpu_seconds, now, percent, true};
  return percent;
}

void CpuSampler::end_round() {
  for (auto it = last_.begin(); it != last_.end();) {
    if (!it->second.seen) {
      it = last_.erase(it);
    } else {
      it->second.seen = false;
      ++it;
    }
  }
}

}  // namespace gpureap
