// Strict UTF-8 validity (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF),
// written out here so the fuzz targets judge the code under test by an independent rule.
#pragma once

#include <cstddef>
#include <string_view>

namespace fuzz {

// Calls visit(code_point) for each character; false at the first invalid sequence.
template <typename Visit>
bool for_each_code_point(std::string_view text, Visit visit) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    std::size_t length = 0;
    char32_t cp = 0;
    if (b0 < 0x80) {
      length = 1, cp = b0;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      length = 2, cp = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      length = 3, cp = b0 & 0x0Fu;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      length = 4, cp = b0 & 0x07u;
    } else {
      return false;
    }
    if (i + length > text.size()) return false;
    for (std::size_t k = 1; k < length; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0u) != 0x80u) return false;
      cp = (cp << 6) | (b & 0x3Fu);
    }
    if ((length == 3 && cp < 0x800) || (length == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    visit(cp);
    i += length;
  }
  return true;
}

inline bool valid_utf8(std::string_view text) {
  return for_each_code_point(text, [](char32_t) {});
}

}  // namespace fuzz
