#include "text/sanitize.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "text/utf8.hpp"

namespace gpureap {
namespace {

// Valid characters a terminal would act on, that change how the rest of the line reads, or
// that show as nothing, so that two different names would look the same: the C1 controls, the
// line and paragraph separators, every format character (Unicode category Cf: zero-width
// spaces and joiners, the bidirectional marks, the byte order mark, tags, ...) and the fillers
// that render blank (Hangul fillers). The Tags block is taken whole: its unassigned code
// points show as nothing too.
bool is_hidden_control(char32_t c) {
  if (c < 0x80) return false;
  if (c <= 0x9F) return true;  // C1
  struct Range {
    char32_t first, last;
  };
  static constexpr Range kHidden[] = {
      {0x00AD, 0x00AD},   {0x0600, 0x0605},   {0x061C, 0x061C},   {0x06DD, 0x06DD},   {0x070F, 0x070F},
      {0x0890, 0x0891},   {0x08E2, 0x08E2},   {0x115F, 0x1160},   {0x180E, 0x180E},   {0x200B, 0x200F},
      {0x2028, 0x202E},   {0x2060, 0x2064},   {0x2066, 0x206F},   {0x3164, 0x3164},   {0xFEFF, 0xFEFF},
      {0xFFA0, 0xFFA0},   {0xFFF9, 0xFFFB},   {0x110BD, 0x110BD}, {0x110CD, 0x110CD}, {0x13430, 0x1343F},
      {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0000, 0xE007F},
  };
  for (const Range& r : kHidden) {
    if (c < r.first) return false;  // sorted
    if (c <= r.last) return true;
  }
  return false;
}

std::string sanitize(std::string_view text, bool keep_newlines, Charset charset) {
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  while (at < text.size()) {
    const unsigned char byte = static_cast<unsigned char>(text[at]);
    if (byte == '\\') {
      out += "\\\\";
      ++at;
      continue;
    }
    if (byte == '\n' && keep_newlines) {
      out += '\n';
      ++at;
      continue;
    }
    if (byte < 0x20 || byte == 0x7F || (byte >= 0x80 && charset == Charset::Ascii)) {
      out += fmt::format("\\x{:02x}", byte);
      ++at;
      continue;
    }
    const utf8::Char c = utf8::decode(text, at);
    if (!c.valid) {
      out += fmt::format("\\x{:02x}", byte);
    } else if (is_hidden_control(c.code)) {
      out += c.code > 0xFFFF ? fmt::format("\\U{:08x}", static_cast<std::uint32_t>(c.code))
                             : fmt::format("\\u{:04x}", static_cast<std::uint32_t>(c.code));
    } else {
      out.append(text.substr(at, c.size));
    }
    at += c.size;
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The value of `digits` hex digits at text[at], or -1.
long hex_at(std::string_view text, std::size_t at, std::size_t digits) {
  if (at + digits > text.size()) return -1;
  long value = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const int d = hex_digit(text[at + i]);
    if (d < 0) return -1;
    value = value * 16 + d;
  }
  return value;
}

void append_utf8(std::string& out, std::uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace

std::string unsanitize_terminal_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    if (text[at] == '\\' && at + 1 < text.size()) {
      const char kind = text[at + 1];
      if (kind == '\\') {
        out += '\\';
        at += 2;
        continue;
      }
      if (kind == 'x') {
        if (const long byte = hex_at(text, at + 2, 2); byte >= 0) {
          out += static_cast<char>(byte);
          at += 4;
          continue;
        }
      }
      if (kind == 'u') {
        if (const long code = hex_at(text, at + 2, 4); code >= 0) {
          append_utf8(out, static_cast<std::uint32_t>(code));
          at += 6;
          continue;
        }
      }
    }
    out += text[at++];
  }
  return out;
}

std::string sanitize_for_terminal(std::string_view text) { return sanitize(text, false, terminal_charset()); }

std::string sanitize_for_terminal(std::string_view text, Charset charset) { return sanitize(text, false, charset); }

std::string sanitize_lines_for_terminal(std::string_view text) { return sanitize(text, true, terminal_charset()); }

}  // namespace gpureap
