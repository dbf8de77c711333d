#include "text/sanitize.hpp"

#include <gtest/gtest.h>

#include "text/utf8.hpp"

namespace gpureap {
namespace {

// Valid UTF-8 with no character a terminal acts on: no C0 control (but '\n' when allowed),
// no DEL, no C1 control (a raw 0x80-0x9F byte is invalid UTF-8, so it fails too).
bool inert(const std::string& s, bool allow_newline = false) {
  for (std::size_t at = 0; at < s.size();) {
    const utf8::Char c = utf8::decode(s, at);
    if (!c.valid) return false;
    if (c.code == '\n' && allow_newline) {
      ++at;
      continue;
    }
    if (c.code < 0x20 || (c.code >= 0x7F && c.code <= 0x9F)) return false;
    at += c.size;
  }
  return true;
}

TEST(TextSanitize, KeepsPrintableAsciiAndValidUtf8) {
  EXPECT_EQ(sanitize_for_terminal("python train.py --lr=0.1"), "python train.py --lr=0.1");
  EXPECT_EQ(sanitize_for_terminal("naïve 学习 🚀 ü"), "naïve 学习 🚀 ü");
  EXPECT_EQ(sanitize_for_terminal(""), "");
}

TEST(TextSanitize, EscapesTheTerminalTitleAndClearScreenAttack) {
  const std::string hostile = "\x1b]0;pwned\x07\x1b[2J";
  const std::string shown = sanitize_for_terminal(hostile);
  EXPECT_EQ(shown, "\\x1b]0;pwned\\x07\\x1b[2J");
  EXPECT_TRUE(inert(shown));
}

TEST(TextSanitize, EscapesEveryC0ControlAndDel) {
  for (int b = 0; b < 0x20; ++b) {
    const std::string shown = sanitize_for_terminal(std::string(1, static_cast<char>(b)));
    EXPECT_EQ(shown.size(), 4u) << b;
    EXPECT_TRUE(inert(shown)) << b;
  }
  EXPECT_EQ(sanitize_for_terminal("a\tb\r\nc"), "a\\x09b\\x0d\\x0ac");
  EXPECT_EQ(sanitize_for_terminal(std::string("\0", 1)), "\\x00");
  EXPECT_EQ(sanitize_for_terminal("\x7f"), "\\x7f");
}

TEST(TextSanitize, EscapesC1ControlsAsRawBytesAndAsUtf8) {
  EXPECT_EQ(sanitize_for_terminal("a\x9b" "2Jb"), "a\\x9b2Jb");  // raw CSI byte
  EXPECT_EQ(sanitize_for_terminal("\x85\x9d"), "\\x85\\x9d");
  EXPECT_EQ(sanitize_for_terminal("\xc2\x9b" "2J"), "\\u009b2J");  // U+009B as UTF-8
  EXPECT_EQ(sanitize_for_terminal("\xc2\x80"), "\\u0080");
  EXPECT_EQ(sanitize_for_terminal("\xc2\xa0"), "\xc2\xa0");  // U+00A0 is printable: kept
}

TEST(TextSanitize, EscapesInvalidUtf8ByteByByte) {
  EXPECT_EQ(sanitize_for_terminal("\xff"), "\\xff");
  EXPECT_EQ(sanitize_for_terminal("\xc0\xaf"), "\\xc0\\xaf");          // overlong '/'
  EXPECT_EQ(sanitize_for_terminal("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(sanitize_for_terminal("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // > U+10FFFF
  EXPECT_EQ(sanitize_for_terminal("ab\xe5\xad"), "ab\\xe5\\xad");       // truncated at the end
  EXPECT_EQ(sanitize_for_terminal("\xe5" "x"), "\\xe5x");                // the next char survives
}

TEST(TextSanitize, EscapesBidiOverridesAndLineSeparators) {
  EXPECT_EQ(sanitize_for_terminal("a\u202Eb"), "a\\u202eb");
  EXPECT_EQ(sanitize_for_terminal("\u2066x\u2069"), "\\u2066x\\u2069");
  EXPECT_EQ(sanitize_for_terminal("a\u2028b"), "a\\u2028b");
}

TEST(TextSanitize, InvisibleFormatCharactersAreShownSoTwoCommandsNeverLookTheSame) {
  // "python train.py" and the same with a zero-width space, joiner, word joiner or byte order
  // mark in it would be two different commands shown identically.
  EXPECT_EQ(sanitize_for_terminal("py\u200Bthon"), "py\\u200bthon");
  EXPECT_EQ(sanitize_for_terminal("py\u200Dthon"), "py\\u200dthon");
  EXPECT_EQ(sanitize_for_terminal("py\u2060thon"), "py\\u2060thon");
  EXPECT_EQ(sanitize_for_terminal("\uFEFFpython"), "\\ufeffpython");
  EXPECT_EQ(sanitize_for_terminal("py\u00ADthon"), "py\\u00adthon");        // soft hyphen
  EXPECT_EQ(sanitize_for_terminal("py\u3164thon"), "py\\u3164thon");        // Hangul filler
  EXPECT_EQ(sanitize_for_terminal("py\U000E0041thon"), "py\\U000e0041thon");  // a tag character
  // An unassigned code point of the Tags block shows as nothing as well (found by the fuzzer).
  EXPECT_EQ(sanitize_for_terminal("py\U000E001Cthon"), "py\\U000e001cthon");
  EXPECT_NE(sanitize_for_terminal("python"), sanitize_for_terminal("py\u200Bthon"));
  // Visible non-ASCII text is kept as it is.
  EXPECT_EQ(sanitize_for_terminal("données 训练 ✓"), "données 训练 ✓");
}

TEST(TextSanitize, EscapesTheBackslashSoTheFormIsUnambiguous) {
  // A name that spells an escape cannot pass for one.
  EXPECT_EQ(sanitize_for_terminal("\\x1b"), "\\\\x1b");
  EXPECT_NE(sanitize_for_terminal("\\x1b"), sanitize_for_terminal("\x1b"));
}

TEST(TextSanitize, LinesVariantKeepsOnlyNewlines) {
  EXPECT_EQ(sanitize_lines_for_terminal("one\ntwo\r\x1b[2J"), "one\ntwo\\x0d\\x1b[2J");
}

TEST(TextSanitize, EveryByteValueComesOutInert) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_TRUE(inert(sanitize_for_terminal(all)));
  EXPECT_TRUE(inert(sanitize_lines_for_terminal(all), true));
  // every two-byte combination, which covers C2 xx
  std::string pairs;
  for (int a = 0xC0; a < 0x100; ++a) {
    for (int b = 0x80; b < 0xC0; ++b) {
      pairs += static_cast<char>(a);
      pairs += static_cast<char>(b);
    }
  }
  EXPECT_TRUE(inert(sanitize_for_terminal(pairs)));
}

TEST(TextSanitize, UnsanitizeGivesBackTheBytesSanitizeWasGiven) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  for (const std::string& text :
       {all, std::string("evil\x1b]0;pwned\x07 C:\\tmp \\x1b literal"), std::string("\xe2\x80\xae rtl \xc2\x85 nel"),
        std::string("plain"), std::string()}) {
    EXPECT_EQ(unsanitize_terminal_text(sanitize_for_terminal(text)), text);
  }
  // A backslash that begins no escape is kept as it is.
  EXPECT_EQ(unsanitize_terminal_text("a\\q \\x4 \\u12 end\\"), "a\\q \\x4 \\u12 end\\");
}

}  // namespace
}  // namespace gpureap
