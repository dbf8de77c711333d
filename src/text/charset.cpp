#include "text/charset.hpp"

#include <langinfo.h>
#include <locale.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "text/utf8.hpp"

namespace gpureap {
namespace {

// The locale LC_CTYPE takes from the environment, as setlocale(LC_CTYPE, "") would choose it.
std::string_view ctype_locale_name() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && value[0] != '\0') return value;
  }
  return "C";
}

bool names_utf8(std::string_view name) {
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos) return false;
  std::string codeset(name.substr(dot + 1, name.find('@', dot) - dot - 1));
  for (char& c : codeset) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return codeset == "utf-8" || codeset == "utf8";
}

// gpureap's glyphs and their ASCII stand-ins.
struct Glyph {
  char32_t code;
  std::string_view ascii;
};
constexpr Glyph kGlyphs[] = {
    {U'·', "|"}, {U'…', "..."}, {U'█', "#"}, {U'▒', "%"}, {U'░', "."}, {U'─', "-"}, {U'│', "|"},
    {U'├', "|"}, {U'└', "`"},   {U'→', ">"}, {U'↑', "^"}, {U'↓', "v"}, {U'—', "-"}, {U'✗', "x"},
    {U'°', ""},  {U'▁', "_"},   {U'▂', "."}, {U'▃', ":"}, {U'▄', "-"}, {U'▅', "="}, {U'▆', "+"},
    {U'▇', "*"},
};

}  // namespace

Charset charset_of_locale(std::string_view name) {
  if (name.empty() || name == "C" || name == "POSIX") return Charset::Ascii;
  const std::string owned(name);
  locale_t locale = newlocale(LC_CTYPE_MASK, owned.c_str(), static_cast<locale_t>(0));
  if (locale == static_cast<locale_t>(0)) return names_utf8(name) ? Charset::Utf8 : Charset::Ascii;
  const bool utf8 = std::strcmp(nl_langinfo_l(CODESET, locale), "UTF-8") == 0;
  freelocale(locale);
  return utf8 ? Charset::Utf8 : Charset::Ascii;
}

Charset terminal_charset() {
  static const Charset charset = charset_of_locale(ctype_locale_name());
  return charset;
}

std::string_view ellipsis(Charset charset) { return charset == Charset::Utf8 ? "…" : "..."; }

std::string in_charset(std::string_view text, Charset charset) {
  if (charset == Charset::Utf8) return std::string(text);
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0; at < text.size();) {
    const auto byte = static_cast<unsigned char>(text[at]);
    if (byte < 0x80) {
      out += text[at++];
      continue;
    }
    const utf8::Char c = utf8::decode(text, at);
    const Glyph* glyph = nullptr;
    for (const Glyph& g : kGlyphs) {
      if (c.valid && g.code == c.code) glyph = &g;
    }
    if (glyph != nullptr) {
      out += glyph->ascii;
      at += c.size;
    } else {
      out += fmt::format("\\x{:02x}", byte);
      ++at;
    }
  }
  return out;
}

}  // namespace gpureap
