// Fitting text into terminal columns without breaking characters. Widths follow the usual
// terminal rules in a simple form: East Asian wide and fullwidth characters and emoji take two
// columns, combining marks and zero-width characters none, everything else one (a byte that is
// not valid UTF-8 counts one: sanitised text has none). Give these sanitised text: a control
// character has no meaningful width.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "text/charset.hpp"

namespace gpureap {

// Columns a terminal uses to show the text.
std::size_t display_width(std::string_view text);

// The text cut to at most `width` columns at a character boundary (never inside a UTF-8
// sequence, combining marks kept with their base), ending in the charset's ellipsis ("…" or
// "...", the terminal's unless given) when something was cut.
std::string truncate_to_width(std::string_view text, std::size_t width);
std::string truncate_to_width(std::string_view text, std::size_t width, Charset charset);

// The text followed by spaces up to `width` columns (unchanged when already as wide).
std::string pad_to_width(std::string_view text, std::size_t width);

// The text in lines of at most `width` columns (width >= 1), broken at spaces where it can be
// and inside a word only when the word alone is wider. Never empty: "" gives one empty line.
std::vector<std::string> wrap_to_width(std::string_view text, std::size_t width);

}  // namespace gpureap
