// kill --name through RE2: bounded pattern, bounded input, linear time on hostile text.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "kill/command_pattern.hpp"

namespace gpureap {
namespace {

TEST(KillNamePattern, MatchesAnywhereInTheCommandLine) {
  std::string error;
  const auto p = CommandPattern::compile("train\\.py", error);
  ASSERT_TRUE(p) << error;
  EXPECT_TRUE(p->search("python3 /home/a/train.py --epochs 3"));
  EXPECT_FALSE(p->search("python3 /home/a/trainXpy"));
}

TEST(KillNamePattern, InvalidOrTooLongPatternIsOneLineError) {
  std::string error;
  EXPECT_FALSE(CommandPattern::compile("(unclosed", error));
  EXPECT_NE(error.find("not a valid regular expression"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  error.clear();
  EXPECT_FALSE(CommandPattern::compile(std::string(CommandPattern::kMaxPatternBytes + 1, 'a'), error));
  EXPECT_NE(error.find("at most 1024"), std::string::npos) << error;
  EXPECT_TRUE(CommandPattern::compile(std::string(CommandPattern::kMaxPatternBytes, 'a'), error));
}

// std::regex recursed once per character here and could crash on a long command line.
TEST(KillNamePattern, HugeHostileCommandLineIsSearchedQuicklyAndOnlyItsStart) {
  std::string error;
  const auto p = CommandPattern::compile("(a|aa)*b", error);
  ASSERT_TRUE(p) << error;
  const std::string hostile(4 << 20, 'a');
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(p->search(hostile));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  const auto tail = CommandPattern::compile("needle", error);
  ASSERT_TRUE(tail) << error;
  EXPECT_FALSE(tail->search(std::string(CommandPattern::kMaxSearchedBytes, ' ') + "needle"));
  EXPECT_TRUE(tail->search(std::string(100, ' ') + "needle"));
}

}  // namespace
}  // namespace gpureap
