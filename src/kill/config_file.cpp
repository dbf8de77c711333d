#include "kill/config_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "kill/toml_nesting.hpp"
#include "text/sanitize.hpp"

namespace gpureap {
std::string toml_where(const std::string& source, const toml::node& node) {
  const auto& begin = node.source().begin;
  if (begin.line == 0) return source;
  return fmt::format("{}:{}:{}", source, begin.line, begin.column);
}

bool toml_only_known(const std::string& source, const toml::table& table, std::initializer_list<std::string_view> known,
                     const std::string& prefix, std::string& error) {
  for (const auto& [key, node] : table) {
    if (std::find(known.begin(), known.end(), std::string_view(key.str())) != known.end()) continue;
    std::string names;
    for (auto k : known) names += fmt::format("{}{}{}", names.empty() ? "" : ", ", prefix, k);
    // Where the key is written ([section] or `key =`), not where its value starts.
    const auto& at = key.source().begin;
    const std::string place = at.line != 0 ? fmt::format("{}:{}:{}", source, at.line, at.column) : toml_where(source, node);
    error = fmt::format("{}: unknown {} '{}{}' (known: {}); a misspelt name would silently be ignored", place,
                        node.is_table() ? "section" : "key", prefix,
                        sanitize_for_terminal(key.str()), names);
    return false;
  }
  return true;
}

std::optional<toml::table> parse_toml(std::string_view text, const std::string& source, std::string& error) {
  if (const auto deep = toml_too_deep(text)) {
    error = fmt::format("{}:{}:{}: nested deeper than {} levels (tables, dotted keys, arrays and inline tables "
                        "together); gpureap's files need three",
                        source, deep->line, deep->column, kMaxTomlNesting);
    return std::nullopt;
  }
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    // toml++ quotes the offending input in its description ("saw 't\n'") raw: the one terminal
    // sanitiser keeps the error one line that cannot drive a terminal.
    const auto& where = e.source().begin;
    error = fmt::format("{}:{}:{}: {}", source, where.line, where.column, sanitize_for_terminal(e.description()));
    return std::nullopt;
  }
}

}  // namespace gpureap
