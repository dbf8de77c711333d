#include "text/human_format.hpp"

#include <gtest/gtest.h>

namespace gpureap {
namespace {

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(512ull << 20), "512 MiB");
  EXPECT_EQ(format_bytes(2ull << 30), "2.0 GiB");
  EXPECT_EQ(format_bytes(std::optional<std::uint64_t>{}), "?");
}

TEST(FormatDuration, PicksTheTwoLargestUnits) {
  EXPECT_EQ(format_duration(45), "45s");
  EXPECT_EQ(format_duration(723), "12m03s");
  EXPECT_EQ(format_duration(7380), "2h03m");
  EXPECT_EQ(format_duration(3 * 86400 + 4 * 3600), "3d04h");
}

TEST(FormatBar, ShowsAnyUseAndClampsOverflow) {
  EXPECT_EQ(format_bar(1, 1000, 4), "█░░░");
  EXPECT_EQ(format_bar(2000, 1000, 2), "██");
  EXPECT_EQ(format_bar(0, 0, 2), "░░");
}

TEST(FormatCudaVersion, SplitsMajorMinor) { EXPECT_EQ(format_cuda_version(12040), "12.4"); }

}  // namespace
}  // namespace gpureap
