// The depth scan run before toml++: deep texts of every kind are refused with their place,
// while strings and comments that merely look deep are not counted.
#include <gtest/gtest.h>

#include <string>

#include "kill/config_file.hpp"
#include "kill/toml_nesting.hpp"

namespace gpureap {
namespace {

std::string repeated(const std::string& piece, int times, const std::string& separator = "") {
  std::string out;
  for (int i = 0; i < times; ++i) out += (i == 0 ? "" : separator) + piece;
  return out;
}

TEST(TomlNesting, EveryKindOfDepthIsCountedAndPlaced) {
  const std::string header = "x = 1\n[" + repeated("a", 90000, ".") + "]\n";
  auto deep = toml_too_deep(header);
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->line, 2u);
  EXPECT_EQ(deep->column, 1u + 2 * kMaxTomlNesting);  // at the dot that opens level 65

  EXPECT_TRUE(toml_too_deep(repeated("a", 90000, ".") + " = 1\n"));                 // dotted key
  EXPECT_TRUE(toml_too_deep("x = " + repeated("[", 90000) + "\n"));                  // arrays
  EXPECT_TRUE(toml_too_deep("x = " + repeated("{a = ", 90000) + "\n"));             // inline tables
  EXPECT_TRUE(toml_too_deep("[[" + repeated("a", 90000, ".") + "]]\n"));            // array of tables
  EXPECT_TRUE(toml_too_deep("x = [{" + repeated("a", 90000, ".") + " = 1}]\n"));    // a key inside a value
  // Levels add up across kinds: 40 header segments and 40 dotted ones are 80.
  EXPECT_TRUE(toml_too_deep("[" + repeated("a", 40, ".") + "]\n" + repeated("b", 40, ".") + " = 1\n"));
}

TEST(TomlNesting, WhatIsNotStructureIsNotCounted) {
  const std::string brackets = repeated("[", 1000);
  EXPECT_FALSE(toml_too_deep("x = \"" + brackets + "\"\n"));
  EXPECT_FALSE(toml_too_deep("x = '" + brackets + "'\n"));
  EXPECT_FALSE(toml_too_deep("x = \"\"\"\n" + brackets + "\n\"\"\"\n"));
  EXPECT_FALSE(toml_too_deep("x = '''\n" + brackets + "\n'''\n"));
  EXPECT_FALSE(toml_too_deep("x = \"\\\"" + brackets + "\"\n"));  // an escaped quote does not end it
  EXPECT_FALSE(toml_too_deep("# " + brackets + "\nx = 1\n"));
  EXPECT_FALSE(toml_too_deep("[\"" + repeated("a", 1000, ".") + "\"]\nx = 1.5\n"));  // one quoted segment
  // Sibling tables do not add up: each header starts again.
  std::string many;
  for (int i = 0; i < 200; ++i) many += "[t" + std::to_string(i) + ".a.b]\nk.l = [[1, 2], {m = 3}]\n";
  EXPECT_FALSE(toml_too_deep(many));
  EXPECT_FALSE(toml_too_deep(repeated("x", 60, ".") + " = 1\n"));
}

TEST(TomlNesting, TheReaderSaysWhereInOneLine) {
  std::string error;
  EXPECT_FALSE(parse_toml("[" + repeated("a", 90000, ".") + "]\n", "policy.toml", error));
  EXPECT_EQ(error.rfind("policy.toml:1:129: nested deeper than 64 levels", 0), 0u) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
  EXPECT_TRUE(parse_toml("[a.b.c]\nd.e = [[1], {f = 2}]\n", "ok.toml", error)) << error;
}

}  // namespace
}  // namespace gpureap
