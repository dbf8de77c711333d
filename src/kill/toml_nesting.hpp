// How deep a TOML text nests, measured before toml++ sees it: toml++ builds (and destroys)
// nested tables recursively, so a table header or dotted key of 90,000 levels (200 KB, under
// the 1 MiB cap on a configuration file) overflows the stack. The scan is one linear pass with
// a bounded stack; it understands strings, comments, headers, dotted keys, arrays and inline
// tables well enough to count every level they open, and leaves every other error to toml++.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace gpureap {

// gpureap's files nest three levels at most; a generous bound that no real file reaches.
inline constexpr int kMaxTomlNesting = 64;

struct TomlPosition {
  std::size_t line = 1;    // 1-based, as toml++ counts
  std::size_t column = 1;  // 1-based, in bytes
};

// Where the text first nests deeper than `limit` levels (a table header's or key's segments,
// plus the arrays and inline tables around a value), or nullopt when it never does.
std::optional<TomlPosition> toml_too_deep(std::string_view text, int limit = kMaxTomlNesting);

}  // namespace gpureap
