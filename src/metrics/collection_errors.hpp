// gpureap_collection_errors_total (docs/metrics.md) and the one line a person is told about each
// new problem: kept alike by export's HostCollector and watch's published metrics.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "metrics/metric_set.hpp"

namespace gpureap {

enum class CollectionSource { Nvml, Proc, KernelLog };

class CollectionErrors {
 public:
  explicit CollectionErrors(std::function<void(const std::string&)> on_problem = {})
      : on_problem_(std::move(on_problem)) {}

  // One read of `source`: `problem` is "" when it was read in full. A problem is counted, and
  // told unless it is the one told last for that source (a lasting problem is told once).
  void note(CollectionSource source, const std::string& problem);
  // Counted only: the caller tells its problems in its own way (watch's log).
  void count(CollectionSource source, bool failed);

  // Every source's series, zeros included.
  void add_metrics(MetricSet& metrics) const;

 private:
  std::function<void(const std::string&)> on_problem_;
  std::array<std::uint64_t, 3> counts_{};
  std::array<std::string, 3> last_told_;
};

}  // namespace gpureap
