#include "text/duration.hpp"

#include <gtest/gtest.h>

namespace gpureap {
namespace {

TEST(TextDuration, AcceptsPlainSecondsAndUnits) {
  EXPECT_EQ(parse_duration("10", 3600), 10.0);
  EXPECT_EQ(parse_duration("0", 3600), 0.0);
  EXPECT_EQ(parse_duration("2.5", 3600), 2.5);
  EXPECT_EQ(parse_duration(".5", 3600), 0.5);
  EXPECT_EQ(parse_duration("500ms", 3600), 0.5);
  EXPECT_EQ(parse_duration("90s", 3600), 90.0);
  EXPECT_EQ(parse_duration("5m", 3600), 300.0);
  EXPECT_EQ(parse_duration("1h", 3600), 3600.0);
  EXPECT_EQ(parse_duration("2d", 7 * 86400), 2 * 86400.0);
}

TEST(TextDuration, RejectsWhatIsNotAFiniteNonNegativeDecimal) {
  for (const char* bad : {"nan", "NaN", "inf", "-inf", "infinity", "-5", "-0", "+5", "1e300", "1e16", "1e3", "",
                          "10x", "10 ", " 10", "1.", "1..2", ".", "s", "0x10", "10ss", "5mm", "1,5",
                          "99999999999999999999999"}) {
    std::string why;
    EXPECT_FALSE(parse_duration(bad, 3600, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
}

TEST(TextDuration, RejectsValuesAboveTheBound) {
  std::string why;
  EXPECT_FALSE(parse_duration("3601", 3600, &why));
  EXPECT_EQ(why, "too long");
  EXPECT_FALSE(parse_duration("61m", 3600));
  EXPECT_FALSE(parse_duration("10000000000000000", 3600));  // 1e16 written out
  EXPECT_EQ(parse_duration("3600", 3600), 3600.0);
  EXPECT_FALSE(parse_duration("0.05", 3600, &why, 0.1));
  EXPECT_EQ(why, "too short");
  EXPECT_EQ(parse_duration("100ms", 3600, nullptr, 0.1), 0.1);
}

TEST(TextDuration, OptionErrorIsOneLineNamingOptionValueAndRange) {
  double seconds = 7;
  const std::string error = check_duration_option("--timeout", "nan", 3600, seconds);
  EXPECT_EQ(error, "--timeout nan: not a duration: give seconds from 0 to 3600 (1h), such as 10, 2.5, 500ms, 90s or 5m");
  EXPECT_EQ(seconds, 7.0);  // untouched on error
  EXPECT_EQ(check_duration_option("--timeout", "1.5", 3600, seconds), "");
  EXPECT_EQ(seconds, 1.5);
  // the value is echoed sanitised
  const std::string hostile = check_duration_option("--since", "\x1b[2J", 86400, seconds);
  EXPECT_EQ(hostile.find('\x1b'), std::string::npos);
  EXPECT_EQ(hostile.find('\n'), std::string::npos);
}

TEST(TextDuration, BoundedNumberForAmounts) {
  double value = 0;
  EXPECT_EQ(check_number_option("--tolerance-mib", "64", 1048576, "MiB", value), "");
  EXPECT_EQ(value, 64.0);
  EXPECT_EQ(check_number_option("--tolerance-mib", "-5", 1048576, "MiB", value),
            "--tolerance-mib -5: not a plain decimal number: give a number of MiB from 0 to 1048576");
  EXPECT_FALSE(parse_bounded_number("nan", 10));
  EXPECT_FALSE(parse_bounded_number("10s", 10));  // no unit on an amount
  EXPECT_FALSE(parse_bounded_number("11", 10));
}

}  // namespace
}  // namespace gpureap
