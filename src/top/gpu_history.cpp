#include "top/gpu_history.hpp"

#include <algorithm>
#include <array>
#include <cmath>

namespace gpureap {
namespace {

void push(std::deque<double>& values, double value) {
  values.push_back(std::clamp(value, 0.0, 1.0));
  if (values.size() > GpuHistory::kSamples) values.pop_front();
}

const std::deque<double> kNone;

}  // namespace

void GpuHistory::record(const Snapshot& snapshot) {
  for (const auto& gpu : snapshot.gpus) {
    const auto& r = gpu.reading;
    if (r.error) continue;
    Series& s = series_[r.index];
    if (gpu.memory.used && gpu.memory.total && *gpu.memory.total > 0) {
      push(s.memory, static_cast<double>(*gpu.memory.used) / static_cast<double>(*gpu.memory.total));
    }
    if (r.util_gpu_percent) push(s.utilization, *r.util_gpu_percent / 100.0);
  }
}

const std::deque<double>& GpuHistory::memory(unsigned gpu) const {
  const auto it = series_.find(gpu);
  return it == series_.end() ? kNone : it->second.memory;
}

const std::deque<double>& GpuHistory::utilization(unsigned gpu) const {
  const auto it = series_.find(gpu);
  return it == series_.end() ? kNone : it->second.utilization;
}

std::string sparkline(const std::deque<double>& values, std::size_t width, bool ascii) {
  static constexpr std::array<const char*, 8> kBlocks{"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  static constexpr std::array<char, 8> kAscii{' ', '.', ':', '-', '=', '+', '*', '#'};
  const std::size_t shown = std::min(values.size(), width);
  std::string out(width - shown, ' ');
  for (std::size_t i = values.size() - shown; i < values.size(); ++i) {
    const auto level = static_cast<std::size_t>(std::lround(values[i] * 7.0));
    if (ascii) {
      out += kAscii[std::min<std::size_t>(level, 7)];
    } else {
      out += kBlocks[std::min<std::size_t>(level, 7)];
    }
  }
  return out;
}

}  // namespace gpureap
