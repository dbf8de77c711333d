#include "text/utf8.hpp"

namespace gpureap::utf8 {

Char decode(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return {lead, 1, true};
  std::size_t size = 0;
  char32_t code = 0;
  char32_t min = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    size = 2, code = lead & 0x1Fu, min = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    size = 3, code = lead & 0x0Fu, min = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    size = 4, code = lead & 0x07u, min = 0x10000;
  } else {
    return {};  // a continuation byte on its own (this includes raw C1 bytes), 0xC0/0xC1, 0xF5..
  }
  if (at + size > text.size()) return {};
  for (std::size_t i = 1; i < size; ++i) {
    const unsigned char next = byte(at + i);
    if ((next & 0xC0u) != 0x80u) return {};
    code = (code << 6) | (next & 0x3Fu);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return {};
  return {code, size, true};
}

}  // namespace gpureap::utf8
