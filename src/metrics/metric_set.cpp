#include "metrics/metric_set.hpp"

#include <stdexcept>

namespace gpureap {
namespace {

bool name_start(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}
bool name_char(char c, bool colon) { return name_start(c, colon) || (c >= '0' && c <= '9'); }

bool valid_name(std::string_view name, bool colon) {
  if (name.empty() || !name_start(name.front(), colon)) return false;
  for (char c : name) {
    if (!name_char(c, colon)) return false;
  }
  return true;
}

}  // namespace

std::string_view metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::Gauge: return "gauge";
    case MetricType::Counter: return "counter";
  }
  return "untyped";
}

bool valid_metric_name(std::string_view name) { return valid_name(name, true); }

bool valid_label_name(std::string_view name) { return valid_name(name, false) && !name.starts_with("__"); }

void MetricFamily::add(std::vector<MetricLabel> labels, double value) {
  for (const auto& label : labels) {
    if (!valid_label_name(label.name)) {
      throw std::invalid_argument("metric " + name + ": invalid label name '" + label.name + "'");
    }
  }
  samples.push_back({std::move(labels), value});
}

MetricFamily& MetricSet::family(std::string_view name, MetricType type, std::string_view help) {
  if (const auto it = index_.find(std::string(name)); it != index_.end()) {
    MetricFamily& existing = families_[it->second];
    if (existing.type != type || existing.help != help) {
      throw std::invalid_argument("metric " + existing.name + " declared twice with different type or help");
    }
    return existing;
  }
  if (!valid_metric_name(name)) throw std::invalid_argument("invalid metric name '" + std::string(name) + "'");
  index_.emplace(std::string(name), families_.size());
  families_.push_back({std::string(name), type, std::string(help), {}});
  return families_.back();
}

void MetricSet::merge(MetricSet other) {
  for (auto& theirs : other.families_) {
    MetricFamily& ours = family(theirs.name, theirs.type, theirs.help);
    for (auto& sample : theirs.samples) ours.samples.push_back(std::move(sample));
  }
}

const MetricFamily* MetricSet::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &families_[it->second];
}

}  // namespace gpureap
