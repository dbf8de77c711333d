// How deep a web-config (YAML) nests, measured before yaml-cpp sees it. yaml-cpp parses
// recursively; its own guard stops at 2,000 levels with "bad file", after seconds of work on a
// 1 MiB file. A web-config nests three levels; this scan, one linear pass, refuses more than
// kMaxYamlNesting with the place: block levels (each deeper indentation, each "- ", "? " or
// ": " that opens a node on the same line) plus flow levels ([ and { outside quotes and
// comments). Block scalars (| and >) are skipped as text.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace gpureap {

inline constexpr int kMaxYamlNesting = 64;

struct YamlPosition {
  std::size_t line = 1;    // 1-based
  std::size_t column = 1;  // 1-based, in bytes
};

std::optional<YamlPosition> yaml_too_deep(std::string_view text, int limit = kMaxYamlNesting);

}  // namespace gpureap
