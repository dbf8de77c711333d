#include "text/truncate.hpp"

#include <gtest/gtest.h>

namespace gpureap {
namespace {

TEST(TextTruncate, MeasuresColumnsNotBytes) {
  EXPECT_EQ(display_width(""), 0u);
  EXPECT_EQ(display_width("abc"), 3u);
  EXPECT_EQ(display_width("naïve"), 5u);
  EXPECT_EQ(display_width("学习"), 4u);      // wide: two columns each
  EXPECT_EQ(display_width("e\u0301"), 1u);   // combining acute: no column
  EXPECT_EQ(display_width("🚀"), 2u);
  EXPECT_EQ(display_width("…"), 1u);
}

TEST(TextTruncate, KeepsTextThatFits) {
  EXPECT_EQ(truncate_to_width("python", 6), "python");
  EXPECT_EQ(truncate_to_width("学习", 4), "学习");
}

TEST(TextTruncate, CutsWithAnEllipsisInTheLastColumn) {
  EXPECT_EQ(truncate_to_width("python train.py", 8), "python …");
  EXPECT_EQ(display_width(truncate_to_width("python train.py", 8)), 8u);
  EXPECT_EQ(truncate_to_width("abc", 1), "…");
  EXPECT_EQ(truncate_to_width("abc", 0), "");
}

TEST(TextTruncate, NeverSplitsAMultiByteCharacter) {
  // "ïïïï" is 8 bytes; cutting by bytes at 3 would leave half a character.
  EXPECT_EQ(truncate_to_width("ïïïï", 3), "ïï…");
  // A wide character that would straddle the limit is left out whole.
  EXPECT_EQ(truncate_to_width("a学习", 3), "a…");
  EXPECT_EQ(truncate_to_width("a学习", 4), "a学…");
  // A combining mark stays with its base.
  EXPECT_EQ(truncate_to_width("e\u0301e\u0301e\u0301", 2), "e\u0301…");
  for (std::size_t w = 0; w < 12; ++w) {
    const std::string cut = truncate_to_width("日本語のコマンド", w);
    EXPECT_LE(display_width(cut), w) << w;
    // valid UTF-8: the last byte is never a lead byte waiting for more
    if (!cut.empty()) {
      EXPECT_NE(static_cast<unsigned char>(cut.back()) & 0xC0u, 0xC0u) << w;
    }
  }
}

TEST(TextTruncate, PadsToColumns) {
  EXPECT_EQ(pad_to_width("ab", 4), "ab  ");
  EXPECT_EQ(pad_to_width("学", 4), "学  ");
  EXPECT_EQ(pad_to_width("abcdef", 4), "abcdef");
}

TEST(TextTruncate, WrapsAtSpacesAndCutsOnlyAWordWiderThanTheLine) {
  EXPECT_EQ(wrap_to_width("why: descendant of 812 holding /dev/nvidia0", 20),
            (std::vector<std::string>{"why: descendant of", "812 holding", "/dev/nvidia0"}));
  EXPECT_EQ(wrap_to_width("", 10), std::vector<std::string>{""});
  EXPECT_EQ(wrap_to_width("  two  spaces  ", 40), std::vector<std::string>{"two spaces"});
  // A word wider than the line: cut at character boundaries, never inside one.
  EXPECT_EQ(wrap_to_width("a /very/long/path", 6), (std::vector<std::string>{"a", "/very/", "long/p", "ath"}));
  for (const auto& line : wrap_to_width("学习学习学习 日本語のコマンド", 5)) EXPECT_LE(display_width(line), 5u) << line;
}

}  // namespace
}  // namespace gpureap
