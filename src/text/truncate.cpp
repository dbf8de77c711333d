#include "text/truncate.hpp"

#include <algorithm>

#include "text/utf8.hpp"

namespace gpureap {
namespace {

struct Range {
  char32_t first, last;
};

bool in(char32_t c, std::initializer_list<Range> ranges) {
  for (const Range& r : ranges) {
    if (c >= r.first && c <= r.last) return true;
  }
  return false;
}

// A simplified wcwidth(): the blocks that matter in command lines and names.
int char_width(char32_t c) {
  if (in(c, {{0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x0610, 0x061A}, {0x064B, 0x065F},
             {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF}, {0x200B, 0x200F}, {0x20D0, 0x20FF}, {0xFE00, 0xFE0F},
             {0xFE20, 0xFE2F}, {0xFEFF, 0xFEFF}})) {
    return 0;
  }
  if (in(c, {{0x1100, 0x115F}, {0x2E80, 0x303E}, {0x3041, 0x33FF}, {0x3400, 0x4DBF}, {0x4E00, 0x9FFF},
             {0xA000, 0xA4CF}, {0xAC00, 0xD7A3}, {0xF900, 0xFAFF}, {0xFE30, 0xFE4F}, {0xFF00, 0xFF60},
             {0xFFE0, 0xFFE6}, {0x1F300, 0x1F64F}, {0x1F680, 0x1F6FF}, {0x1F900, 0x1F9FF},
             {0x1FA70, 0x1FAFF}, {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD}})) {
    return 2;
  }
  return 1;
}

int width_at(std::string_view text, std::size_t at, std::size_t& size) {
  const utf8::Char c = utf8::decode(text, at);
  size = c.size;
  return c.valid ? char_width(c.code) : 1;
}

}  // namespace

std::size_t display_width(std::string_view text) {
  std::size_t width = 0;
  for (std::size_t at = 0, size = 0; at < text.size(); at += size) {
    width += static_cast<std::size_t>(width_at(text, at, size));
  }
  return width;
}

std::string truncate_to_width(std::string_view text, std::size_t width) {
  return truncate_to_width(text, width, terminal_charset());
}

std::string truncate_to_width(std::string_view text, std::size_t width, Charset charset) {
  if (display_width(text) <= width) return std::string(text);
  const std::string_view mark = ellipsis(charset);
  const std::size_t mark_width = display_width(mark);
  if (width < mark_width) return std::string(mark.substr(0, width));
  const std::size_t room = width - mark_width;
  std::size_t used = 0, at = 0;
  while (at < text.size()) {
    std::size_t size = 0;
    const auto w = static_cast<std::size_t>(width_at(text, at, size));
    if (used + w > room) break;
    used += w;
    at += size;
  }
  return std::string(text.substr(0, at)).append(mark);
}

std::string pad_to_width(std::string_view text, std::size_t width) {
  const std::size_t have = display_width(text);
  std::string out(text);
  if (have < width) out.append(width - have, ' ');
  return out;
}

std::vector<std::string> wrap_to_width(std::string_view text, std::size_t width) {
  width = std::max<std::size_t>(width, 1);
  std::vector<std::string> lines(1);
  std::size_t used = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    if (text[at] == ' ') {  // a space starts no line and ends none; the next word decides
      ++at;
      continue;
    }
    const std::size_t end = std::min(text.find(' ', at), text.size());
    const std::string_view word = text.substr(at, end - at);
    const std::size_t word_width = display_width(word);
    const std::size_t gap = used == 0 ? 0 : 1;
    if (used + gap + word_width <= width) {
      if (gap) lines.back() += ' ';
      lines.back() += word;
      used += gap + word_width;
    } else if (word_width <= width) {
      lines.emplace_back(word);
      used = word_width;
    } else {
      // Wider than a line: cut at character boundaries, starting on a line of its own.
      if (used > 0) lines.emplace_back();
      used = 0;
      for (std::size_t i = 0, size = 0; i < word.size(); i += size) {
        const auto w = static_cast<std::size_t>(width_at(word, i, size));
        if (used + w > width) {
          lines.emplace_back();
          used = 0;
        }
        lines.back() += word.substr(i, size);
        used += w;
      }
    }
    at = end;
  }
  return lines;
}

}  // namespace gpureap
