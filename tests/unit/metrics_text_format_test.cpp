// The Prometheus text format writer: escaping, number forms, grouping and order of families,
// and the names it refuses.
#include "metrics/text_format.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <gtest/gtest.h>

namespace gpureap {
namespace {

TEST(MetricsTextFormat, EscapesBackslashQuoteAndNewlineInLabelValues) {
  EXPECT_EQ(escape_label_value(R"(C:\dir)"), R"(C:\\dir)");
  EXPECT_EQ(escape_label_value(R"(say "hi")"), R"(say \"hi\")");
  EXPECT_EQ(escape_label_value("two\nlines"), R"(two\nlines)");
  EXPECT_EQ(escape_label_value("a\\\"\n"), R"(a\\\"\n)");
  // Tabs and other characters are legal inside the quotes: kept.
  EXPECT_EQ(escape_label_value("tab\there 学习 🚀"), "tab\there 学习 🚀");
}

TEST(MetricsTextFormat, HelpEscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(escape_help("a \"b\" c\\d\ne"), "a \"b\" c\\\\d\\ne");
}

TEST(MetricsTextFormat, InvalidUtf8BecomesTheReplacementCharacter) {
  // One bad byte would make Prometheus reject the whole scrape.
  EXPECT_EQ(escape_label_value("ok\xff\xfe!"), "ok\xEF\xBF\xBD\xEF\xBF\xBD!");
  EXPECT_EQ(escape_label_value("\xC3"), "\xEF\xBF\xBD") << "a truncated sequence";
  EXPECT_EQ(escape_label_value("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD") << "an overlong '/'";
}

TEST(MetricsTextFormat, NumbersAreWrittenAsPrometheusReadsThem) {
  EXPECT_EQ(format_sample_value(0), "0");
  EXPECT_EQ(format_sample_value(85899345920.0), "85899345920") << "bytes: whole, no exponent";
  EXPECT_EQ(format_sample_value(-3), "-3");
  EXPECT_EQ(format_sample_value(0.25), "0.25");
  EXPECT_EQ(format_sample_value(1e300), "1e+300");
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(format_sample_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_sample_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(std::stod(format_sample_value(0.1 + 0.2)), 0.1 + 0.2) << "reads back to the same double";
}

TEST(MetricsTextFormat, FamiliesAreGroupedInTheOrderTheyWereFirstUsed) {
  MetricSet set;
  auto& used = set.family("gpureap_used_bytes", MetricType::Gauge, "Used.");
  auto& events = set.family("gpureap_events_total", MetricType::Counter, "Events.");
  // Samples added interleaved, as collections do GPU by GPU.
  used.add({{"gpu", "0"}}, 1);
  events.add({{"gpu", "0"}}, 5);
  used.add({{"gpu", "1"}}, 2);
  set.family("gpureap_used_bytes", MetricType::Gauge, "Used.").add({{"gpu", "2"}}, 3);
  EXPECT_EQ(render_text_format(set),
            "# HELP gpureap_used_bytes Used.\n"
            "# TYPE gpureap_used_bytes gauge\n"
            "gpureap_used_bytes{gpu=\"0\"} 1\n"
            "gpureap_used_bytes{gpu=\"1\"} 2\n"
            "gpureap_used_bytes{gpu=\"2\"} 3\n"
            "# HELP gpureap_events_total Events.\n"
            "# TYPE gpureap_events_total counter\n"
            "gpureap_events_total{gpu=\"0\"} 5\n");
}

TEST(MetricsTextFormat, ALabelledValueIsWrittenEscapedInItsLine) {
  MetricSet set;
  set.family("gpureap_process_gpu_memory_bytes", MetricType::Gauge, "Per process.")
      .add({{"pid", "7"}, {"command", "python -c \"print('a\\\\b')\"\nx"}}, 1024);
  set.family("gpureap_driver_up", MetricType::Gauge, "Up.").add(1);
  EXPECT_EQ(render_text_format(set),
            "# HELP gpureap_process_gpu_memory_bytes Per process.\n"
            "# TYPE gpureap_process_gpu_memory_bytes gauge\n"
            "gpureap_process_gpu_memory_bytes{pid=\"7\",command=\"python -c \\\"print('a\\\\\\\\b')\\\"\\nx\"} 1024\n"
            "# HELP gpureap_driver_up Up.\n"
            "# TYPE gpureap_driver_up gauge\n"
            "gpureap_driver_up 1\n");
}

TEST(MetricsTextFormat, MergeAppendsSamplesToFamiliesBothHave) {
  MetricSet ours;
  ours.family("gpureap_a", MetricType::Gauge, "A.").add({{"x", "1"}}, 1);
  MetricSet theirs;
  theirs.family("gpureap_watch_matches_total", MetricType::Counter, "W.").add(4);
  theirs.family("gpureap_a", MetricType::Gauge, "A.").add({{"x", "2"}}, 2);
  ours.merge(std::move(theirs));
  ASSERT_EQ(ours.families().size(), 2u);
  EXPECT_EQ(ours.families()[0].samples.size(), 2u);
  EXPECT_EQ(ours.families()[1].name, "gpureap_watch_matches_total");
}

TEST(MetricsTextFormat, NamesAreCheckedAndAFamilyKeepsOneTypeAndHelp) {
  EXPECT_TRUE(valid_metric_name("gpureap_gpu_memory_used_bytes"));
  EXPECT_TRUE(valid_metric_name("job:gpu_memory:sum"));
  EXPECT_FALSE(valid_metric_name("9lives"));
  EXPECT_FALSE(valid_metric_name("gpu-memory"));
  EXPECT_FALSE(valid_metric_name(""));
  EXPECT_TRUE(valid_label_name("pod_uid"));
  EXPECT_FALSE(valid_label_name("__name__")) << "reserved by Prometheus";
  EXPECT_FALSE(valid_label_name("a:b"));
  MetricSet set;
  EXPECT_THROW(set.family("bad name", MetricType::Gauge, "x"), std::invalid_argument);
  auto& family = set.family("gpureap_x", MetricType::Gauge, "X.");
  EXPECT_THROW(set.family("gpureap_x", MetricType::Counter, "X."), std::invalid_argument);
  EXPECT_THROW(family.add({{"bad-label", "v"}}, 1), std::invalid_argument);
}

}  // namespace
}  // namespace gpureap
