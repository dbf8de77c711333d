// Decoding one UTF-8 character at a time, strictly (RFC 3629): no overlong forms, no
// surrogates, nothing above U+10FFFF. Shared by the sanitiser and the width helpers so both
// agree on where a character starts and ends.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpureap::utf8 {

struct Char {
  char32_t code = 0;     // the code point; meaningless when !valid
  std::size_t size = 1;  // bytes it takes (1 for an invalid byte)
  bool valid = false;
};

// The character that starts at text[at] (at < text.size()). An invalid or truncated sequence
// yields {valid=false, size=1}: the caller treats that one byte on its own.
Char decode(std::string_view text, std::size_t at);

}  // namespace gpureap::utf8
