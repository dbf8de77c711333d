// Quoting for the commands doctor prints for a person to copy. gpureap itself never runs a
// shell: these strings are only shown.
#pragma once

#include <string>
#include <string_view>

namespace gpureap {

// The word as POSIX sh reads it back unchanged: bare when it is only safe characters,
// otherwise in single quotes ('\'' for a quote inside).
std::string shell_quote(std::string_view word);

}  // namespace gpureap
