// The recent past of each GPU for the header's sparklines: memory used and utilization, one
// sample per refresh, the newest last.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <string>

#include "snapshot/snapshot.hpp"

namespace gpureap {

class GpuHistory {
 public:
  static constexpr std::size_t kSamples = 120;

  void record(const Snapshot& snapshot);  // a GPU without a reading records nothing
  // Shares of 0..1, oldest first; empty for a GPU never read.
  const std::deque<double>& memory(unsigned gpu) const;
  const std::deque<double>& utilization(unsigned gpu) const;

 private:
  struct Series {
    std::deque<double> memory, utilization;
  };
  std::map<unsigned, Series> series_;
};

// The last `width` values as bars "▁▂▃▄▅▆▇█" (ASCII " .:-=+*#" when `ascii`), right-aligned:
// fewer values than the width leave spaces at the left.
std::string sparkline(const std::deque<double>& values, std::size_t width, bool ascii);

}  // namespace gpureap
