// How wide text output may be, and fitting untrusted text into it. On a terminal, a table row
// should not wrap: the command column is cut to what is left of the line (COLUMNS when set to
// a number, else the terminal's width). Through a pipe or a file, or with --wide, nothing is
// cut: a script or grep gets whole command lines.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

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

  static constexpr std::size_t kMinimumColumns = 16;

 private:
  std::optional<std::size_t> columns_;
};

// `untrusted` sanitised, cut and padded to exactly `width` columns: a table cell.
std::string fixed_cell(std::string_view untrusted, std::size_t width);

}  // namespace gpureap
