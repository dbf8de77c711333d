#include "doctor/finding.hpp"

namespace gpureap {

std::string_view severity_name(Severity severity) {
  switch (severity) {
    case Severity::Info: return "info";
    case Severity::Warning: return "warning";
    case Severity::Critical: return "critical";
  }
  return "info";
}

std::string_view risk_name(Risk risk) {
  switch (risk) {
    case Risk::None: return "none";
    case Risk::Low: return "low";
    case Risk::Medium: return "medium";
    case Risk::High: return "high";
  }
  return "none";
}

}  // namespace gpureap
