// The terminal's character set: what a non-UTF-8 locale gets instead of UTF-8 bytes.
#include <gtest/gtest.h>

#include "text/charset.hpp"
#include "text/sanitize.hpp"
#include "text/truncate.hpp"

namespace gpureap {
namespace {

TEST(Charset, TheLocaleNameDecides) {
  EXPECT_EQ(charset_of_locale("C"), Charset::Ascii);
  EXPECT_EQ(charset_of_locale("POSIX"), Charset::Ascii);
  EXPECT_EQ(charset_of_locale(""), Charset::Ascii);
  EXPECT_EQ(charset_of_locale("C.UTF-8"), Charset::Utf8);
  // A UTF-8 locale this host has no data for still names its codeset.
  EXPECT_EQ(charset_of_locale("xx_YY.utf8"), Charset::Utf8);
  EXPECT_EQ(charset_of_locale("xx_YY.ISO-8859-1"), Charset::Ascii);
}

TEST(Charset, AsciiTerminalGetsNoByteAboveSevenBitsFromAName) {
  // "Û" is C3 9B: on an 8-bit terminal 0x9B is CSI.
  EXPECT_EQ(sanitize_for_terminal("job-\xc3\x9b-x", Charset::Ascii), "job-\\xc3\\x9b-x");
  EXPECT_EQ(sanitize_for_terminal("job-\xc3\x9b-x", Charset::Utf8), "job-\xc3\x9b-x");
  EXPECT_EQ(sanitize_for_terminal("训", Charset::Ascii), "\\xe8\\xae\\xad");
  EXPECT_EQ(sanitize_for_terminal("a\x1b[2J\\", Charset::Ascii), "a\\x1b[2J\\\\");
  // Read back to the same bytes.
  EXPECT_EQ(unsanitize_terminal_text(sanitize_for_terminal("job-\xc3\x9b-x", Charset::Ascii)), "job-\xc3\x9b-x");
}

TEST(Charset, GpureapsGlyphsBecomeAscii) {
  EXPECT_EQ(in_charset("GPU 0 · 35°C · [███░░]", Charset::Ascii), "GPU 0 | 35C | [###..]");
  EXPECT_EQ(in_charset("  └─ 12 ├─ │", Charset::Ascii), "  `- 12 |- |");
  EXPECT_EQ(in_charset("reading…", Charset::Ascii), "reading...");
  EXPECT_EQ(in_charset("GPU 0 · 35°C", Charset::Utf8), "GPU 0 · 35°C");
  // Anything else is never written raw.
  EXPECT_EQ(in_charset("é\xff", Charset::Ascii), "\\xc3\\xa9\\xff");
}

TEST(Charset, CutTextEndsInThreeDotsOnAnAsciiTerminal) {
  EXPECT_EQ(truncate_to_width("python3 train.py", 10, Charset::Ascii), "python3...");
  EXPECT_EQ(truncate_to_width("python3 train.py", 10, Charset::Utf8), "python3 t…");
  EXPECT_EQ(truncate_to_width("python3 train.py", 2, Charset::Ascii), "..");
  EXPECT_EQ(truncate_to_width("short", 10, Charset::Ascii), "short");
}

}  // namespace
}  // namespace gpureap
