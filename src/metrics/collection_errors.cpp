#include "metrics/collection_errors.hpp"

namespace gpureap {
namespace {

constexpr std::array<const char*, 3> kSourceNames = {"nvml", "proc", "kernel-log"};

std::size_t at(CollectionSource source) { return static_cast<std::size_t>(source); }

}  // namespace

void CollectionErrors::count(CollectionSource source, bool failed) {
  if (failed) ++counts_[at(source)];
}

void CollectionErrors::note(CollectionSource source, const std::string& problem) {
  count(source, !problem.empty());
  std::string& last = last_told_[at(source)];
  if (problem == last) return;
  last = problem;
  if (!problem.empty() && on_problem_) on_problem_(problem);
}

void CollectionErrors::add_metrics(MetricSet& metrics) const {
  auto& errors = metrics.family("gpureap_collection_errors_total", MetricType::Counter,
                                "Collections in which a source could not be read in full.");
  for (std::size_t i = 0; i < kSourceNames.size(); ++i) {
    errors.add({{"source", kSourceNames[i]}}, static_cast<double>(counts_[i]));
  }
}

}  // namespace gpureap
