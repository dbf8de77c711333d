#include "text/sanitize.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "text/utf8.hpp"

namespace gpureap {
namespace {

// Valid characters a terminal would act on or that change how the rest of the line reads.
bool is_hidden_control(char32_t c) {
  return (c >= 0x80 && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F || c == 0x2028 || c == 0x2029 ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

std::string sanitize(std::string_view text, bool keep_newlines) {
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
    if (byte < 0x20 || byte == 0x7F) {
      out += fmt::format("\\x{:02x}", byte);
      ++at;
      continue;
    }
    const utf8::Char c = utf8::decode(text, at);
    if (!c.valid) {
      out += fmt::format("\\x{:02x}", byte);
    } else if (is_hidden_control(c.code)) {
      out += fmt::format("\\u{:04x}", static_cast<std::uint32_t>(c.code));
    } else {
      out.append(text.substr(at, c.size));
    }
    at += c.size;
  }
  return out;
}

}  // namespace

std::string sanitize_for_terminal(std::string_view text) { return sanitize(text, false); }

std::string sanitize_lines_for_terminal(std::string_view text) { return sanitize(text, true); }

}  // namespace gpureap
