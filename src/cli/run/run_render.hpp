// What `gpureap run` tells a person (on stderr: stdout belongs to the job) and a script (the
// JSON report "gpureap.run/1", docs/run-json.md), and its exit status (docs/exit-codes.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "job/run_report.hpp"

namespace gpureap {

inline constexpr const char* kRunSchema = "gpureap.run/1";

// The command's status (128 + signal when a signal ended it), or one of run's own statuses.
int run_exit_status(const job::RunReport& report);

// Nothing for a job that ended cleanly with nothing left; otherwise what happened, sanitised.
std::string render_run_summary(const job::RunReport& report);
nlohmann::ordered_json run_report_json(const job::RunReport& report);

}  // namespace gpureap
