// The few character tests the drm parsers share: no locale, no allocation. Internal to src/drm.
#pragma once

#include <string_view>

namespace gpureap::drm {

constexpr bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// `text` without the blanks (space, tab, CR) at either end.
constexpr std::string_view trimmed(std::string_view text) {
  while (!text.empty() && is_blank(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_blank(text.back())) text.remove_suffix(1);
  return text;
}

// The first line of `text`, trimmed: what a one-value sysfs file holds.
constexpr std::string_view first_line(std::string_view text) { return trimmed(text.substr(0, text.find('\n'))); }

}  // namespace gpureap::drm
