// Signal names both ways: for what gpureap shows (the CLI, reports, the audit log) and for what
// a person types (--signal, a policy's signal).
#include "text/signal_names.hpp"

#include <charconv>
#include <csignal>
#include <cstring>
#include <string>
#include <system_error>

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
  if (!text.empty() && text[0] >= '0' && text[0] <= '9') {
    int number = 0;
    const char* end = text.data() + text.size();
    const auto [stop, error] = std::from_chars(text.data(), end, number);
    if (error != std::errc() || stop != end) return std::nullopt;
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

}  // namespace gpureap
