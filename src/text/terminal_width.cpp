#include "text/terminal_width.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "text/sanitize.hpp"
#include "text/terminal_style.hpp"
#include "text/truncate.hpp"

namespace gpureap {
namespace {

std::optional<std::size_t> columns_from_env() {
  const char* env = std::getenv("COLUMNS");
  if (env == nullptr) return std::nullopt;
  std::size_t value = 0;
  const char* end = env + std::strlen(env);
  const auto [ptr, error] = std::from_chars(env, end, value);
  if (error != std::errc() || ptr != end || value == 0 || value > 100000) return std::nullopt;
  return value;
}

}  // namespace

OutputWidth OutputWidth::for_fd(int fd, bool wide) {
  if (wide || isatty(fd) != 1) return unlimited();
  if (const auto env = columns_from_env()) return OutputWidth(env);
  winsize size{};
  if (ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return OutputWidth(std::size_t{size.ws_col});
  return OutputWidth(std::size_t{80});
}

std::string OutputWidth::rest_of_line(std::string_view untrusted, std::string_view line_so_far) const {
  std::string text = sanitize_for_terminal(untrusted);
  if (!columns_) return text;
  const std::size_t used = visible_width(line_so_far);
  const std::size_t room = used + kMinimumColumns < *columns_ ? *columns_ - used : kMinimumColumns;
  return truncate_to_width(text, room);
}

std::string OutputWidth::joined(const std::vector<std::string>& items, std::string_view separator,
                                std::string_view indent) const {
  std::string out;
  std::size_t used = 0;
  for (const std::string& item : items) {
    const std::size_t w = visible_width(item);
    if (out.empty()) {
      out = item;
      used = w;
    } else if (columns_ && used + visible_width(separator) + w > *columns_) {
      out.append("\n").append(indent).append(item);
      used = visible_width(indent) + w;
    } else {
      out.append(separator).append(item);
      used += visible_width(separator) + w;
    }
  }
  return out;
}

std::vector<std::string> OutputWidth::wrapped(std::string_view text, std::string_view first_indent,
                                              std::string_view indent) const {
  if (!columns_) return {std::string(first_indent).append(text).append("\n")};
  const std::size_t indent_width = std::max(display_width(first_indent), display_width(indent));
  const std::size_t room = *columns_ > indent_width + kMinimumColumns ? *columns_ - indent_width : kMinimumColumns;
  std::vector<std::string> lines;
  for (const std::string& line : wrap_to_width(text, room)) {
    lines.push_back(std::string(lines.empty() ? first_indent : indent).append(line).append("\n"));
  }
  return lines;
}

std::string fixed_cell(std::string_view untrusted, std::size_t width) {
  return pad_to_width(truncate_to_width(sanitize_for_terminal(untrusted), width), width);
}

}  // namespace gpureap
