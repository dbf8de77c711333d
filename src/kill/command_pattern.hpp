// `kill --name`: a POSIX extended regular expression matched against command lines.
// Not std::regex: libstdc++ recurses once per character of the subject, so a long command line
// that any user can give a process crashed root's `gpureap kill --name` (stack overflow).
// glibc's regexec does not recurse over the subject; the pattern's length is bounded because
// its parser recurses per nesting level.
#pragma once

#include <regex.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace gpureap {

struct InvalidCommandPattern : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class CommandPattern {
 public:
  static constexpr std::size_t kMaxPatternBytes = 1024;
  // Throws InvalidCommandPattern (with the reason) for a pattern that does not compile or is too long.
  explicit CommandPattern(const std::string& pattern);
  bool matches(const std::string& command) const;

 private:
  struct Free {
    void operator()(regex_t* compiled) const;
  };
  std::unique_ptr<regex_t, Free> compiled_;
};

}  // namespace gpureap
