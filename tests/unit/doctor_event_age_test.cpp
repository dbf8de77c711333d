// Ages of kernel-log events for `doctor --since`: absolute times with zones, and durations.
#include <gtest/gtest.h>

#include "doctor/event_age.hpp"

namespace gpureap {
namespace {

TEST(EventAge, Iso8601WithEveryOffsetForm) {
  // 2026-11-29T18:30:00Z = 1795977000
  EXPECT_EQ(parse_iso8601("2026-11-29T18:30:00Z"), 1795977000.0);
  EXPECT_EQ(parse_iso8601("2026-11-29T18:30:00+0000"), 1795977000.0);
  EXPECT_EQ(parse_iso8601("2026-11-29T19:30:00+01:00"), 1795977000.0);
  EXPECT_EQ(parse_iso8601("2026-11-29T13:30:00-0500"), 1795977000.0);
  EXPECT_DOUBLE_EQ(*parse_iso8601("2026-11-29T18:30:00.250000+0000"), 1795977000.25);
  EXPECT_EQ(parse_iso8601("2026-11-29T18:30:00+0000 node1 kernel:"), 1795977000.0) << "what follows is ignored";
}

TEST(EventAge, TimesWithoutAZoneOrMalformedAreUnknown) {
  for (const char* text : {"2026-11-29T18:30:00", "Nov 29 18:30:00", "[ 5678.901234]", "[Sun Nov 29 18:31:00 2026]",
                           "2026-13-29T18:30:00Z", "2026-11-29T25:30:00Z", "2026-11-29T18:30:00+2500",
                           "2026-11-29T18:30:00.Z", "2026-11-29T18:30", "", "2026-11-29T18:30:00Zjunk"}) {
    EXPECT_FALSE(parse_iso8601(text).has_value()) << text;
  }
}

TEST(EventAge, UptimeIsReadFromProc) {
  const auto up = uptime_seconds();
  ASSERT_TRUE(up.has_value());
  EXPECT_GT(*up, 0.0);
  EXPECT_FALSE(uptime_seconds("/nonexistent").has_value());
}

}  // namespace
}  // namespace gpureap
