#include "drm/fdinfo_quantity.hpp"

#include <limits>

#include "drm/text_scan.hpp"

namespace gpureap::drm {
namespace {

// The leading digits of `text` as a number, `text` advanced past them; nullopt with no digit
// or on overflow.
std::optional<std::uint64_t> take_number(std::string_view& text) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (kMax - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  text.remove_prefix(i);
  return value;
}

}  // namespace

std::optional<std::uint64_t> parse_memory_value(std::string_view value) {
  std::string_view rest = trimmed(value);
  const auto number = take_number(rest);
  if (!number) return std::nullopt;
  rest = trimmed(rest);
  unsigned shift = 0;
  if (rest.empty()) {
    shift = 0;
  } else if (rest == "KiB") {
    shift = 10;
  } else if (rest == "MiB") {
    shift = 20;
  } else if (rest == "GiB") {
    shift = 30;
  } else {
    return std::nullopt;
  }
  if (shift != 0 && *number > (std::numeric_limits<std::uint64_t>::max() >> shift)) return std::nullopt;
  return *number << shift;
}

std::optional<std::uint64_t> parse_engine_ns(std::string_view value) {
  std::string_view rest = trimmed(value);
  const auto number = take_number(rest);
  if (!number || trimmed(rest) != "ns") return std::nullopt;
  return number;
}

std::optional<std::uint64_t> parse_amdgpu_legacy_kb(std::string_view value) {
  std::string_view rest = trimmed(value);
  const auto number = take_number(rest);
  if (!number || trimmed(rest) != "kB" || *number > (std::numeric_limits<std::uint64_t>::max() >> 10)) {
    return std::nullopt;
  }
  return *number << 10;
}

std::optional<std::uint64_t> parse_plain_count(std::string_view value) {
  std::string_view rest = trimmed(value);
  const auto number = take_number(rest);
  if (!number || !rest.empty()) return std::nullopt;
  return number;
}

}  // namespace gpureap::drm
