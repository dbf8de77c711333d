// Doctor's two views of a diagnosis: text for a person (most severe first, each remedy with
// its risk) and JSON (schema gpureap.doctor/1, docs/doctor-json.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/terminal_style.hpp"
#include "doctor/doctor.hpp"

namespace gpureap {

// What --fix did with one action.
struct FixResult {
  std::string finding_id;
  std::string description;
  std::string outcome;  // "done", "failed", "skipped"
  std::string message;  // for a person
};

struct DoctorReport {
  const Snapshot* snapshot = nullptr;  // the final snapshot (after fixes, when there were some)
  const Diagnosis* diagnosis = nullptr;
  const DoctorOptions* options = nullptr;
  bool fix_requested = false;
  std::vector<FixResult> fixes;
  int exit_code = 0;
};

nlohmann::json doctor_json(const DoctorReport& report);
std::string render_doctor(const DoctorReport& report, const TerminalStyle& style);
// The list shown before --fix asks.
std::string render_fix_plan(const std::vector<const FixAction*>& actions, const TerminalStyle& style);

}  // namespace gpureap
