// Metrics as values: families of samples, in the order they were first added, ready to be
// written in Prometheus's text format (metrics/text_format.hpp). Collections build one
// MetricSet; `watch` adds its own families to it the same way (docs/metrics.md).
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpureap {

enum class MetricType { Gauge, Counter };
std::string_view metric_type_name(MetricType type);  // "gauge", "counter"

struct MetricLabel {
  std::string name;
  std::string value;  // any text: the writer escapes it and replaces invalid UTF-8
};

struct MetricSample {
  std::vector<MetricLabel> labels;
  double value = 0;
};

// [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; [a-zA-Z_][a-zA-Z0-9_]* without a leading "__"
// (reserved by Prometheus) for label names.
bool valid_metric_name(std::string_view name);
bool valid_label_name(std::string_view name);

struct MetricFamily {
  std::string name;
  MetricType type = MetricType::Gauge;
  std::string help;
  std::vector<MetricSample> samples;

  // One sample. Label names are gpureap's own constants: an invalid one is a bug and throws
  // std::invalid_argument, never something input can cause.
  void add(std::vector<MetricLabel> labels, double value);
  void add(double value) { add({}, value); }
};

class MetricSet {
 public:
  // The family with this name, created at the end on first use; the reference stays valid as
  // families are added. Asking again with another type or help text, or an invalid name,
  // throws std::invalid_argument (a bug).
  MetricFamily& family(std::string_view name, MetricType type, std::string_view help);

  // Adds other's families: samples of a family both have go after this one's.
  void merge(MetricSet other);

  const std::deque<MetricFamily>& families() const { return families_; }
  const MetricFamily* find(std::string_view name) const;

 private:
  std::deque<MetricFamily> families_;
  std::unordered_map<std::string, std::size_t> index_;
};

}  // namespace gpureap
