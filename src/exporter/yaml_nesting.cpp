#include "exporter/yaml_nesting.hpp"

#include <vector>

namespace gpureap {

std::optional<YamlPosition> yaml_too_deep(std::string_view text, int limit) {
  std::vector<std::size_t> indents;  // the block levels open; never more than the limit
  std::size_t line_no = 0;
  std::size_t block_scalar_indent = std::string_view::npos;  // inside | or >: lines indented past this
  int flow = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    std::size_t at = line.find_first_not_of(' ');
    if (at == std::string_view::npos || line[at] == '#') continue;  // blank or a comment
    if (block_scalar_indent != std::string_view::npos) {
      if (at > block_scalar_indent) continue;
      block_scalar_indent = std::string_view::npos;
    }
    const auto too_deep = [&](std::size_t column) { return YamlPosition{line_no, column + 1}; };
    if (flow == 0) {
      while (!indents.empty() && indents.back() >= at) indents.pop_back();
      indents.push_back(at);
      // "- - - x" and "? " open a node each on the same line.
      int inline_levels = 0;
      while (at + 1 < line.size() && (line[at] == '-' || line[at] == '?') && line[at + 1] == ' ') {
        ++inline_levels;
        at = line.find_first_not_of(' ', at + 1);
        if (at == std::string_view::npos) break;
        if (static_cast<int>(indents.size()) + inline_levels > limit) return too_deep(at);
      }
      if (static_cast<int>(indents.size()) + inline_levels > limit) return too_deep(at == std::string_view::npos ? 0 : at);
      if (at == std::string_view::npos) continue;
    }
    char quote = 0;
    for (std::size_t i = at; i < line.size(); ++i) {
      const char c = line[i];
      if (quote != 0) {
        if (c == '\\' && quote == '"') {
          ++i;
        } else if (c == quote) {
          quote = 0;
        }
        continue;
      }
      if (c == '"' || c == '\'') {
        quote = c;
      } else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
        break;
      } else if (c == '[' || c == '{') {
        if (static_cast<int>(indents.size()) + ++flow > limit) return too_deep(i);
      } else if ((c == ']' || c == '}') && flow > 0) {
        --flow;
      } else if ((c == '|' || c == '>') && flow == 0 && i + 1 >= line.find_last_not_of(" +-0123456789") + 1 &&
                 (i == 0 || line[i - 1] == ' ')) {
        block_scalar_indent = indents.empty() ? 0 : indents.back();
      }
    }
  }
  return std::nullopt;
}

}  // namespace gpureap
