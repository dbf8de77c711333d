#include "kill/command_pattern.hpp"

#include <fmt/format.h>

namespace gpureap {

void CommandPattern::Free::operator()(regex_t* compiled) const {
  regfree(compiled);
  delete compiled;
}

CommandPattern::CommandPattern(const std::string& pattern) {
  if (pattern.size() > kMaxPatternBytes) {
    throw InvalidCommandPattern(fmt::format("longer than {} bytes", kMaxPatternBytes));
  }
  if (pattern.find('\0') != std::string::npos) throw InvalidCommandPattern("contains a NUL byte");
  auto compiled = std::make_unique<regex_t>();
  const int status = regcomp(compiled.get(), pattern.c_str(), REG_EXTENDED | REG_NOSUB);
  if (status != 0) {
    char message[256];
    regerror(status, compiled.get(), message, sizeof(message));
    throw InvalidCommandPattern(message);
  }
  compiled_.reset(compiled.release());
}

bool CommandPattern::matches(const std::string& command) const {
  // Arguments are joined by spaces (ProcessInfo::command), so the subject holds no NUL.
  return regexec(compiled_.get(), command.c_str(), 0, nullptr, 0) == 0;
}

}  // namespace gpureap
