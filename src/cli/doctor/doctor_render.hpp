// Doctor's two views of a diagnosis: text for a person (most severe first, each remedy with
// its risk) and JSON (schema gpureap.doctor/1, docs/doctor-json.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/terminal_style.hpp"
#include "text/terminal_width.hpp"
#include "doctor/doctor.hpp"
#include "doctor/doctor_fix.hpp"

namespace gpureap {

struct DoctorReport {
  const Snapshot* snapshot = nullptr;  // the final snapshot (after fixes, when there were some)
  const Diagnosis* diagnosis = nullptr;
  const DoctorOptions* options = nullptr;
  bool fix_requested = false;
  std::vector<FixResult> fixes;
  std::optional<int> exit_code;  // none while fixes are still to come: not said
};

nlohmann::json doctor_json(const DoctorReport& report);

// A finding's evidence as that JSON shows it: a record is an object, a list an array.
nlohmann::json evidence_json(const EvidenceValue& evidence);
// Text for a terminal: every line that quotes a command, a file name or kernel-log text is
// sanitised. Nothing is cut here (commands sit inside sentences): at a limited width the lines
// break at spaces, and continue indented under their own start.
std::string render_doctor(const DoctorReport& report, const TerminalStyle& style, const OutputWidth& width);
// The list shown before --fix asks.
std::string render_fix_plan(const std::vector<const FixAction*>& actions, const TerminalStyle& style,
                            const OutputWidth& width);

}  // namespace gpureap
