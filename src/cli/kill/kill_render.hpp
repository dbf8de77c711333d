// What `gpureap kill` tells a person and a script: the plan before acting, one line per
// target afterwards (how it ended, in how many ms), the memory verification per GPU, the JSON
// schema "gpureap.kill/1" (docs/kill-json.md) and the exit status (docs/exit-codes.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "kill/kill_outcome.hpp"
#include "text/terminal_style.hpp"
#include "text/terminal_width.hpp"

namespace gpureap {

inline constexpr const char* kKillSchema = "gpureap.kill/1";

int kill_exit_status(const KillReport& report);  // docs/exit-codes.md

// Text for a terminal: everything that came from a process or the kernel is sanitised, and
// commands are cut to `width` (whole when unlimited: --wide or a pipe).
std::string render_plan(const KillPlan& plan, const KillSettings& settings, const TerminalStyle& style,
                        const OutputWidth& width);
std::string render_results(const KillPlan& plan, const KillReport& report, const TerminalStyle& style);
nlohmann::ordered_json kill_report_json(const KillPlan& plan, const KillReport& report);

}  // namespace gpureap
