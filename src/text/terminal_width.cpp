#include "text/terminal_width.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

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

std::string fixed_cell(std::string_view untrusted, std::size_t width) {
  return pad_to_width(truncate_to_width(sanitize_for_terminal(untrusted), width), width);
}

}  // namespace gpureap
