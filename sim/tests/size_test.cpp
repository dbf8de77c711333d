#include "common/size.hpp"

#include <gtest/gtest.h>

namespace gpusim {
namespace {

TEST(Size, ParsesBytesAndBinaryUnits) {
  EXPECT_EQ(*parse_size("1073741824"), 1073741824u);
  EXPECT_EQ(*parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(*parse_size("80GiB"), 80ull << 30);
  EXPECT_EQ(*parse_size("2TiB"), 2ull << 40);
  EXPECT_EQ(*parse_size("4KiB"), 4096u);
  EXPECT_EQ(*parse_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*parse_size("64 mb"), 64ull << 20);
  EXPECT_EQ(*parse_size("7G"), 7ull << 30);
}

TEST(Size, RejectsGarbage) {
  for (const char* bad : {"", "GiB", "12XB", "-1", "1.5", "99999999999999999999", "20000000TiB"}) {
    EXPECT_FALSE(parse_size(bad).ok()) << bad;
  }
}

TEST(Size, Formats) {
  EXPECT_EQ(format_size(1023), "1023 B");
  EXPECT_EQ(format_size(512ull << 20), "512.00 MiB");
  EXPECT_EQ(format_size(80ull << 30), "80.00 GiB");
}

}  // namespace
}  // namespace gpusim
