// The names of kill outcomes, for the CLI, the report and the JSON.
#include <string>

#include "kill/escalation.hpp"

namespace gpureap {

std::string kill_outcome_name(KillOutcome outcome) {
  switch (outcome) {
    case KillOutcome::ExitedAfterSignal: return "exited";
    case KillOutcome::Killed: return "killed";
    case KillOutcome::AlreadyGone: return "already-gone";
    case KillOutcome::Zombie: return "zombie";
    case KillOutcome::StuckInD: return "stuck-in-d";
    case KillOutcome::Survived: return "survived";
    case KillOutcome::PermissionDenied: return "permission-denied";
    case KillOutcome::IdentityChanged: return "identity-changed";
    case KillOutcome::Refused: return "refused";
    case KillOutcome::Planned: return "planned";
  }
  return "unknown";
}

}  // namespace gpureap
