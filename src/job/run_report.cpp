#include "job/run_report.hpp"

namespace gpureap::job {

const char* job_end_name(JobEnd end) {
  switch (end) {
    case JobEnd::Exited: return "exited";
    case JobEnd::FailFast: return "fail-fast";
    case JobEnd::Hung: return "hung";
    case JobEnd::SpawnFailed: return "spawn-failed";
  }
  return "?";
}

bool RunReport::left_behind() const {
  for (const auto& t : ended) {
    if (t.outcome == KillOutcome::Survived || t.outcome == KillOutcome::StuckInD ||
        t.outcome == KillOutcome::PermissionDenied || t.outcome == KillOutcome::Refused) {
      return true;
    }
  }
  for (const auto& v : verification) {
    if (!v.verified) return true;
  }
  return false;
}

}  // namespace gpureap::job
