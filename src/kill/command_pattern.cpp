#include "kill/command_pattern.hpp"

#include <fmt/format.h>
#include <re2/re2.h>

namespace gpureap {

std::optional<CommandPattern> CommandPattern::compile(const std::string& pattern, std::string& error) {
  if (pattern.size() > kMaxPatternBytes) {
    error = fmt::format("the pattern is {} bytes long; at most {} are accepted", pattern.size(), kMaxPatternBytes);
    return std::nullopt;
  }
  RE2::Options options;
  options.set_log_errors(false);  // RE2 would print its own message on stderr
  auto re = std::make_shared<const RE2>(pattern, options);
  if (!re->ok()) {
    error = "not a valid regular expression (RE2 syntax): " + re->error();
    return std::nullopt;
  }
  CommandPattern compiled;
  compiled.re_ = std::move(re);
  return compiled;
}

bool CommandPattern::search(std::string_view text) const {
  if (text.size() > kMaxSearchedBytes) text = text.substr(0, kMaxSearchedBytes);
  return RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *re_);
}

}  // namespace gpureap
