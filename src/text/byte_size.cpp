#include "text/byte_size.hpp"

#include <cmath>
#include <utility>

#include "text/duration.hpp"

namespace gpureap {

std::optional<std::uint64_t> parse_byte_size(std::string_view text, std::uint64_t max_bytes, std::string* why) {
  const auto fail = [why](std::string reason) -> std::optional<std::uint64_t> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  if (text.empty()) return fail("empty");
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"TiB", 0x1p40}, {"GiB", 0x1p30}, {"MiB", 0x1p20}, {"KiB", 0x1p10}, {"TB", 0x1p40}, {"GB", 0x1p30},
      {"MB", 0x1p20},  {"KB", 0x1p10},  {"T", 0x1p40},   {"G", 0x1p30},   {"M", 0x1p20},  {"K", 0x1p10},
      {"B", 1},
  };
  double unit = 1;
  std::string_view number = text;
  for (const auto& [suffix, bytes] : kUnits) {
    if (number.size() > suffix.size() && number.ends_with(suffix)) {
      number.remove_suffix(suffix.size());
      unit = bytes;
      break;
    }
  }
  const auto value = parse_bounded_number(number, HUGE_VAL);
  if (!value) return fail("not a size (such as 4096, 512MiB or 2GiB)");
  const double bytes = std::floor(*value * unit);
  if (!std::isfinite(bytes) || bytes > static_cast<double>(max_bytes)) return fail("too large");
  return static_cast<std::uint64_t>(bytes);
}

}  // namespace gpureap
