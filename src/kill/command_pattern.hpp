// `kill --name`: a pattern searched in command lines. RE2, not std::regex: libstdc++'s regex
// recurses once per character and can exhaust the stack on a long command line, which any
// user controls. RE2 runs in time linear in the input, with bounded memory; on top of that the
// pattern and the text searched are bounded in length.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace re2 {
class RE2;
}

namespace gpureap {

class CommandPattern {
 public:
  static constexpr std::size_t kMaxPatternBytes = 1024;
  // Of each command line: the kernel's default ARG_MAX, so a long argv[0] cannot push the rest of
  // a command line out of reach (RE2 searches in linear time, so the whole of it is cheap).
  static constexpr std::size_t kMaxSearchedBytes = 2 * 1024 * 1024;

  // nullopt, with `error` set to one line saying why, when the pattern is too long or invalid.
  static std::optional<CommandPattern> compile(const std::string& pattern, std::string& error);

  // True when the pattern matches anywhere in the first kMaxSearchedBytes of `text`.
  bool search(std::string_view text) const;

 private:
  std::shared_ptr<const re2::RE2> re_;
};

}  // namespace gpureap
