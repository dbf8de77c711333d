// How wide text output may be, and fitting untrusted text into it. On a terminal, a table row
// should not wrap: the command column is cut to what is left of the line (COLUMNS when set to
// a number, else the terminal's width). Through a pipe or a file, or with --wide, nothing is
// cut: a script or grep gets whole command lines.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpureap {

class OutputWidth {
 public:
  // Unlimited with `wide` or when fd is not a terminal; else COLUMNS when a positive number,
  // else the terminal's width (TIOCGWINSZ), else 80.
  static OutputWidth for_fd(int fd, bool wide);
  static OutputWidth unlimited() { return OutputWidth(std::nullopt); }
  explicit OutputWidth(std::optional<std::size_t> columns) : columns_(columns) {}

  std::optional<std::size_t> columns() const { return columns_; }

  // `untrusted` sanitised and, when the width is limited, cut at a character boundary to the
  // columns left after `line_so_far` (which may carry gpureap's colour codes), but never to
  // fewer than kMinimumColumns.
  std::string rest_of_line(std::string_view untrusted, std::string_view line_so_far) const;

  // Lines gpureap writes itself, fitted without losing a word: `items` (which may carry colour
  // codes) joined by `separator`, a line broken between two items where the next would not fit,
  // each line after the first starting with `indent`. One line when the width is unlimited.
  std::string joined(const std::vector<std::string>& items, std::string_view separator,
                     std::string_view indent) const;
  // Plain text (sanitised, no colour codes) broken at spaces into lines that fit, the first
  // starting with `first_indent` and the others with `indent`; each line ends in '\n'.
  std::vector<std::string> wrapped(std::string_view text, std::string_view first_indent,
                                   std::string_view indent) const;

  static constexpr std::size_t kMinimumColumns = 16;

 private:
  std::optional<std::size_t> columns_;
};

// Plain text (sanitised) in lines that fit `width` (OutputWidth::wrapped), the words of each line
// passed through `styled` (a colour code never spans a line break); each line ends in '\n'.
template <typename Styler>
std::string fit_lines(const OutputWidth& width, std::string_view text, std::string_view first_indent,
                      std::string_view indent, Styler styled) {
  std::string out;
  for (const std::string& line : width.wrapped(text, first_indent, indent)) {
    const std::size_t lead = out.empty() ? first_indent.size() : indent.size();
    out += line.substr(0, lead) + styled(line.substr(lead, line.size() - lead - 1)) + "\n";
  }
  return out;
}
inline std::string fit_lines(const OutputWidth& width, std::string_view text, std::string_view first_indent,
                             std::string_view indent) {
  return fit_lines(width, text, first_indent, indent, [](const std::string& line) { return line; });
}

// `untrusted` sanitised, cut and padded to exactly `width` columns: a table cell.
std::string fixed_cell(std::string_view untrusted, std::size_t width);

}  // namespace gpureap
