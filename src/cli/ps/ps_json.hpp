// `gpureap ps --json`: the stable, documented schema "gpureap.ps/1" (docs/ps-json.md).
#pragma once

#include <nlohmann/json.hpp>

#include "cli/ps/ps_filter.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

inline constexpr const char* kPsSchema = "gpureap.ps/1";

nlohmann::ordered_json ps_to_json(const Snapshot& snapshot, const PsFilter& filter);

}  // namespace gpureap
