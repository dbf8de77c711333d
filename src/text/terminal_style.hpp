// Colour only for people: honours NO_COLOR (https://no-color.org), TERM=dumb and non-terminals.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gpureap {

enum class ColorChoice { Auto, Always, Never };

// "always", "never"; anything else (the default "auto") is Auto. The CLI checks the value.
ColorChoice parse_color_choice(std::string_view text);

class TerminalStyle {
 public:
  explicit TerminalStyle(bool enabled) : enabled_(enabled) {}
  // Auto: colour when fd is a terminal, NO_COLOR is unset or empty, and TERM is not "dumb".
  static TerminalStyle for_fd(int fd, ColorChoice choice);

  bool enabled() const { return enabled_; }
  std::string bold(std::string_view text) const { return wrap("1", text); }
  std::string dim(std::string_view text) const { return wrap("2", text); }
  std::string red(std::string_view text) const { return wrap("31", text); }
  std::string green(std::string_view text) const { return wrap("32", text); }
  std::string yellow(std::string_view text) const { return wrap("33", text); }
  std::string cyan(std::string_view text) const { return wrap("36", text); }

 private:
  std::string wrap(std::string_view code, std::string_view text) const;
  bool enabled_;
};

// Columns `text` takes on a terminal, not counting the colour codes TerminalStyle adds
// (ESC [ ... m). Give it sanitised text: any other escape would be counted as text.
std::size_t visible_width(std::string_view text);

}  // namespace gpureap
