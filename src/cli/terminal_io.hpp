// Writing results and asking the person at the terminal, shared by the commands.
#pragma once

#include <string>
#include <string_view>

namespace gpureap {

// Writes to stdout and flushes, so output and prompts on stderr appear in order.
void write_out(const std::string& text);

// Prints "<question> [y/N] " on stderr and reads a line from stdin; true only for an explicit yes.
bool ask_yes_no(std::string_view question);

}  // namespace gpureap
