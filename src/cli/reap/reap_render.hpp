// What `gpureap reap` tells a person and a script after the kill engine's plan and results:
// one line per GPU checked against its baseline, one per survivor (state, wchan for D), the
// JSON schema "gpureap.reap/1" (docs/reap-json.md) and the exit status (docs/exit-codes.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "reap/reap.hpp"
#include "text/terminal_style.hpp"

namespace gpureap {

inline constexpr const char* kReapSchema = "gpureap.reap/1";

// `driver_failure_code`: 3 or 4, used when the verdict is DriverUnreadable.
int reap_exit_status(const ReapReport& report, int driver_failure_code);

std::string render_reap_outcome(const ReapReport& report, const TerminalStyle& style);
nlohmann::ordered_json reap_report_json(const KillPlan& plan, const ReapReport& report, int exit_status);

}  // namespace gpureap
