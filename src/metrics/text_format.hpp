// Prometheus text exposition format 0.0.4: "# HELP", "# TYPE", then the family's samples, one
// family after the other. Numbers are written in the C locale (Prometheus parses with Go's
// ParseFloat); label values escape \\, \" and \n, and bytes that are not UTF-8 become U+FFFD,
// since one invalid label value makes Prometheus reject the whole scrape.
#pragma once

#include <string>
#include <string_view>

#include "metrics/metric_set.hpp"

namespace gpureap {

inline constexpr std::string_view kTextFormatContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string render_text_format(const MetricSet& metrics);
// Appends to `out` (one buffer for several sets).
void append_text_format(const MetricSet& metrics, std::string& out);

// The pieces, for tests and for callers that write one line by hand.
std::string escape_label_value(std::string_view value);
std::string escape_help(std::string_view help);
std::string format_sample_value(double value);

}  // namespace gpureap
