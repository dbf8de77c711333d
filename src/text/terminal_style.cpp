#include "text/terminal_style.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "text/truncate.hpp"

namespace gpureap {

ColorChoice parse_color_choice(std::string_view text) {
  if (text == "always") return ColorChoice::Always;
  if (text == "never") return ColorChoice::Never;
  return ColorChoice::Auto;
}

TerminalStyle TerminalStyle::for_fd(int fd, ColorChoice choice) {
  if (choice == ColorChoice::Always) return TerminalStyle(true);
  if (choice == ColorChoice::Never) return TerminalStyle(false);
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return TerminalStyle(false);
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::strcmp(term, "dumb") == 0) return TerminalStyle(false);
  return TerminalStyle(isatty(fd) == 1);
}

std::string TerminalStyle::wrap(std::string_view code, std::string_view text) const {
  if (!enabled_) return std::string(text);
  std::string out;
  out.reserve(text.size() + 10);
  out += "\x1b[";
  out += code;
  out += 'm';
  out += text;
  out += "\x1b[0m";
  return out;
}

std::size_t visible_width(std::string_view text) {
  std::string plain;
  plain.reserve(text.size());
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (text[at] == '\x1b' && at + 1 < text.size() && text[at + 1] == '[') {
      const std::size_t end = text.find('m', at);
      if (end != std::string_view::npos) {
        at = end;
        continue;
      }
    }
    plain += text[at];
  }
  return display_width(plain);
}

}  // namespace gpureap
