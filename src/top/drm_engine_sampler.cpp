#include "top/drm_engine_sampler.hpp"

#include <algorithm>
#include <cmath>

namespace gpureap {

std::optional<unsigned> DrmEngineSampler::sample(const drm::DrmClient& client, std::chrono::steady_clock::time_point now) {
  if (client.client_id == 0 || client.stats.engines.empty()) return std::nullopt;
  Last current;
  current.at = now;
  current.seen = true;
  for (const auto& e : client.stats.engines) {
    if (e.cycles && e.total_cycles) {
      current.engines[e.engine] = {*e.cycles, *e.total_cycles};
    } else if (e.busy_ns) {
      current.engines[e.engine] = {*e.busy_ns / std::max<std::uint64_t>(e.capacity, 1), 0};
    }
  }
  auto& slot = last_[{client.pdev, client.client_id}];
  const Last previous = std::exchange(slot, std::move(current));
  if (previous.engines.empty()) return std::nullopt;
  const double wall_ns = std::chrono::duration<double, std::nano>(now - previous.at).count();
  std::optional<double> busiest;
  for (const auto& [name, values] : slot.engines) {
    const auto before = previous.engines.find(name);
    if (before == previous.engines.end() || values.first < before->second.first) continue;  // new, or reset
    const double grown = static_cast<double>(values.first - before->second.first);
    double share = 0;
    if (values.second != 0) {
      if (values.second <= before->second.second) continue;
      share = grown / static_cast<double>(values.second - before->second.second);
    } else if (wall_ns > 0) {
      share = grown / wall_ns;
    } else {
      continue;
    }
    busiest = std::max(busiest.value_or(0.0), share);
  }
  if (!busiest) return std::nullopt;
  return static_cast<unsigned>(std::lround(std::clamp(*busiest, 0.0, 1.0) * 100));
}

void DrmEngineSampler::end_round() {
  std::erase_if(last_, [](const auto& entry) { return !entry.second.seen; });
  for (auto& [key, last] : last_) last.seen = false;
}

}  // namespace gpureap
