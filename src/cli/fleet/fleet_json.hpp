// `gpureap fleet --json`: the schema gpureap.fleet/1 (docs/fleet-json.md).
#pragma once

#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "fleet/fleet_view.hpp"

namespace gpureap {

nlohmann::ordered_json fleet_json(const FleetView& view, std::string_view source, int exit_code);

}  // namespace gpureap
