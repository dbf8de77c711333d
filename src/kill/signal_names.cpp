// Names of signals and of kill outcomes, for the CLI, the report and the audit log.
#include <csignal>
#include <cstring>
#include <string>

#include "kill/escalation.hpp"
#include "proc/parse_util.hpp"

namespace gpureap {
namespace {

struct NamedSignal {
  const char* name;  // without "SIG"
  int number;
};

constexpr NamedSignal kSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},  {"USR1", SIGUSR1},
    {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP},
};

std::string upper(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

}  // namespace

std::string signal_name(int signal) {
  // glibc knows every standard signal ("CHLD" for 17); the table is the fallback.
  if (const char* abbrev = sigabbrev_np(signal); abbrev != nullptr) return std::string("SIG") + abbrev;
  for (const auto& entry : kSignals) {
    if (entry.number == signal) return std::string("SIG") + entry.name;
  }
  if (signal >= SIGRTMIN && signal <= SIGRTMAX) return "SIGRTMIN+" + std::to_string(signal - SIGRTMIN);
  return "SIG" + std::to_string(signal);
}

std::optional<int> parse_signal(const std::string& text) {
  if (!text.empty() && procfs::is_digit(text[0])) {
    int number = 0;
    if (!procfs::parse_whole_unsigned(std::string_view(text), number)) return std::nullopt;
    if (number < 1 || number > 64) return std::nullopt;
    return number;
  }
  std::string name = upper(text);
  if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
  for (const auto& entry : kSignals) {
    if (name == entry.name) return entry.number;
  }
  return std::nullopt;
}

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
