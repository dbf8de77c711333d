#include "text/human_format.hpp"

#include <array>
#include <cmath>

#include <fmt/format.h>

namespace gpureap {

std::string format_bytes(std::uint64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return value >= 100.0 ? fmt::format("{:.0f} {}", value, kUnits[unit])
                        : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string format_bytes(const std::optional<std::uint64_t>& bytes) {
  return bytes ? format_bytes(*bytes) : std::string("?");
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0)) return "?";
  const auto total = static_cast<std::uint64_t>(seconds);
  const auto days = total / 86400, hours = (total / 3600) % 24, minutes = (total / 60) % 60,
             secs = total % 60;
  if (days > 0) return fmt::format("{}d{:02}h", days, hours);
  if (hours > 0) return fmt::format("{}h{:02}m", hours, minutes);
  if (minutes > 0) return fmt::format("{}m{:02}s", minutes, secs);
  return fmt::format("{}s", secs);
}

std::string format_short_duration(double seconds) {
  if (!(seconds >= 0)) return "?";
  if (seconds >= 10) return format_duration(seconds);
  return fmt::format("{:g}s", std::round(seconds * 100) / 100);
}

std::string format_bar(std::uint64_t used, std::uint64_t total, int width) {
  if (width <= 0) return {};
  int filled = 0;
  if (total > 0) {
    const double share = std::min(1.0, static_cast<double>(used) / static_cast<double>(total));
    filled = static_cast<int>(std::lround(share * width));
    if (used > 0 && filled == 0) filled = 1;  // any use at all is visible
  }
  std::string bar;
  for (int i = 0; i < width; ++i) bar += i < filled ? "█" : "░";
  return bar;
}

std::string format_cuda_version(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

}  // namespace gpureap
