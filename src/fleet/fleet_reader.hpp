// Reads the fleet view from Prometheus: a fixed set of instant PromQL queries over gpureap's
// metrics (docs/metrics.md), evaluated at one instant, aggregated on the server by instance
// and GPU (`max by`), so that what comes back has a known shape and few series: the biggest
// holders through `topk`, never every process of the fleet.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fleet/fleet_view.hpp"
#include "fleet/query_result.hpp"

namespace gpureap {

inline constexpr int kMaxTopHolders = 100;

// One instant query at an optional time: the PrometheusClient, or a test's canned answers.
using QueryFunction = std::function<QueryResult(const std::string& promql, std::optional<double> at)>;

struct FleetReadResult {
  FleetView view;
  std::optional<QueryFailure> failure;  // the first query that failed; the view is then empty
};

// `top` holders per GPU, 1 to kMaxTopHolders.
FleetReadResult read_fleet(const QueryFunction& query, int top);

// The PromQL read_fleet sends, in order (for tests and docs/fleet.md).
std::vector<std::string> fleet_queries(int top);

}  // namespace gpureap
