// Reading gpureap's TOML files strictly: the configuration ([kill]) and watch's policy. A file
// is read (procfs::read_bounded_file) only when it is a regular file of bounded size (a FIFO,
// /dev/zero or a directory is an error, never a hang) that root or its user owns and nobody
// else may write; every error names "<source>:<line>:<column>"; an unknown key is an
// error, because a misspelt name would otherwise silently drop what it was written for.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include <toml++/toml.h>

namespace gpureap {

// The largest configuration or policy file read (procfs::read_bounded_file reads it).
inline constexpr std::size_t kMaxConfigBytes = 1 << 20;

// "<source>:<line>:<column>" of a node, or `source` when the node has no position.
std::string toml_where(const std::string& source, const toml::node& node);

// False, with `error` naming the first key of `table` not in `known` (and listing the known
// ones, each prefixed by `prefix`, e.g. "kill."), when there is one.
bool toml_only_known(const std::string& source, const toml::table& table, std::initializer_list<std::string_view> known,
                     const std::string& prefix, std::string& error);

// The parsed document; nullopt with the parse error as one sanitised line in `error`:
// "<source>:<line>:<column>: <description>". A text nested deeper than kMaxTomlNesting levels
// (kill/toml_nesting.hpp) is refused before toml++, which would recurse through it, sees it.
std::optional<toml::table> parse_toml(std::string_view text, const std::string& source, std::string& error);

}  // namespace gpureap
