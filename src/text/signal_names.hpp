// Signal names both ways: 15 is shown as "SIGTERM", and "TERM", "SIGTERM", "term" or "15" read
// as 15.
#pragma once

#include <optional>
#include <string>

namespace gpureap {

std::string signal_name(int signal);                       // 15 -> "SIGTERM"
std::optional<int> parse_signal(const std::string& text);  // "TERM", "SIGTERM", "15" -> 15

}  // namespace gpureap
