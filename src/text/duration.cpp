#include "text/duration.hpp"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

constexpr std::size_t kMaxDigits = 20;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// DIGITS[.DIGITS] or .DIGITS, nothing else.
bool plain_decimal(std::string_view text) {
  if (text.empty() || text.size() > kMaxDigits) return false;
  std::size_t digits = 0, dots = 0;
  for (char c : text) {
    if (is_digit(c)) {
      ++digits;
    } else if (c == '.') {
      ++dots;
    } else {
      return false;
    }
  }
  return digits > 0 && dots <= 1 && text.back() != '.';
}

std::optional<double> fail(std::string* why, std::string reason) {
  if (why != nullptr) *why = std::move(reason);
  return std::nullopt;
}

// 3600 -> "3600 (1h)": the bound as the user may write it.
std::string describe_seconds(double seconds) {
  if (seconds >= 86400 && std::fmod(seconds, 86400) == 0) return fmt::format("{} ({}d)", seconds, seconds / 86400);
  if (seconds >= 3600 && std::fmod(seconds, 3600) == 0) return fmt::format("{} ({}h)", seconds, seconds / 3600);
  if (seconds >= 60 && std::fmod(seconds, 60) == 0) return fmt::format("{} ({}m)", seconds, seconds / 60);
  return fmt::format("{}", seconds);
}

}  // namespace

std::optional<double> parse_bounded_number(std::string_view text, double max, std::string* why) {
  if (text.empty()) return fail(why, "empty");
  if (!plain_decimal(text)) return fail(why, "not a plain decimal number");
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return fail(why, "not a plain decimal number");
  }
  if (value > max) return fail(why, "too large");
  return value;
}

std::optional<double> parse_duration(std::string_view text, double max_seconds, std::string* why,
                                     double min_seconds) {
  if (text.empty()) return fail(why, "empty");
  double unit = 1;
  std::string_view number = text;
  const auto strip = [&](std::string_view suffix, double seconds) {
    if (number.size() < suffix.size() || number.substr(number.size() - suffix.size()) != suffix) return false;
    number.remove_suffix(suffix.size());
    unit = seconds;
    return true;
  };
  strip("ms", 0.001) || strip("s", 1) || strip("m", 60) || strip("h", 3600) || strip("d", 86400);
  const auto value = parse_bounded_number(number, HUGE_VAL);
  if (!value) return fail(why, "not a duration");
  const double seconds = *value * unit;
  if (!std::isfinite(seconds) || seconds > max_seconds) {
    return fail(why, "too long");
  }
  if (seconds < min_seconds) return fail(why, "too short");
  return seconds;
}

std::string check_duration_option(std::string_view option, std::string_view text, double max_seconds,
                                  double& seconds, double min_seconds) {
  std::string why;
  const auto value = parse_duration(text, max_seconds, &why, min_seconds);
  if (value) {
    seconds = *value;
    return {};
  }
  return fmt::format("{} {}: {}: give seconds from {} to {}, such as 10, 2.5, 500ms, 90s or 5m", option,
                     sanitize_for_terminal(text), why, describe_seconds(min_seconds), describe_seconds(max_seconds));
}

std::string check_number_option(std::string_view option, std::string_view text, double max, std::string_view unit,
                                double& value) {
  std::string why;
  const auto parsed = parse_bounded_number(text, max, &why);
  if (parsed) {
    value = *parsed;
    return {};
  }
  return fmt::format("{} {}: {}: give a number of {} from 0 to {}", option, sanitize_for_terminal(text), why, unit,
                     max);
}

}  // namespace gpureap
