// Hand-written helpers for the /proc parsers: no locale, no allocation, no exceptions.
// Internal to src/proc.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>

namespace gpureap::procfs {

constexpr bool is_digit(char c) { return c >= '0' && c <= '9'; }
constexpr bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// Parses the unsigned decimal number at the start of `text` and advances past it.
// False (text untouched) when there is no digit or the value does not fit in T.
template <typename T>
bool take_unsigned(std::string_view& text, T& out) {
  static_assert(std::is_integral_v<T>);
  using U = std::make_unsigned_t<T>;
  constexpr U max = static_cast<U>(std::numeric_limits<T>::max());
  U value = 0;
  std::size_t i = 0;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    const auto digit = static_cast<U>(text[i] - '0');
    if (value > (max - digit) / 10) return false;
    value = static_cast<U>(value * 10 + digit);
  }
  if (i == 0) return false;
  out = static_cast<T>(value);
  text.remove_prefix(i);
  return true;
}

// Like take_unsigned, with an optional leading '-'. The magnitude must fit in int64.
inline bool take_signed(std::string_view& text, std::int64_t& out) {
  std::string_view rest = text;
  const bool negative = !rest.empty() && rest.front() == '-';
  if (negative) rest.remove_prefix(1);
  std::int64_t magnitude = 0;
  if (!take_unsigned(rest, magnitude)) return false;
  out = negative ? -magnitude : magnitude;
  text = rest;
  return true;
}

// The whole of `text` is one unsigned decimal number that fits in T.
template <typename T>
bool parse_whole_unsigned(std::string_view text, T& out) {
  T value{};
  if (!take_unsigned(text, value) || !text.empty()) return false;
  out = value;
  return true;
}

inline void skip_spaces(std::string_view& text) {
  std::size_t i = 0;
  while (i < text.size() && is_space(text[i])) ++i;
  text.remove_prefix(i);
}

// The next whitespace-separated token ("" at the end of the text).
inline std::string_view take_token(std::string_view& text) {
  skip_spaces(text);
  std::size_t i = 0;
  while (i < text.size() && !is_space(text[i])) ++i;
  const std::string_view token = text.substr(0, i);
  text.remove_prefix(i);
  return token;
}

// The next line without its '\n'; advances past the '\n'.
inline std::string_view take_line(std::string_view& text) {
  const std::size_t end = text.find('\n');
  const std::string_view line = text.substr(0, end);
  text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  return line;
}

// A /proc directory entry naming a process or thread ("1234"); false for "self", "stat"...
template <typename Pid>
bool parse_pid_name(const char* name, Pid& pid) {
  return is_digit(name[0]) && parse_whole_unsigned(std::string_view(name), pid) && pid > 0;
}

constexpr bool is_lower_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f'); }

inline bool all_lower_hex(std::string_view text) {
  for (const char c : text) {
    if (!is_lower_hex(c)) return false;
  }
  return !text.empty();
}

}  // namespace gpureap::procfs
