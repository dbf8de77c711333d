// Running gpureap the way a person does: stdin and stdout on a pseudo-terminal of a chosen
// width that is also the process's controlling terminal (/dev/tty), stderr on a pipe.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpureap::test {

struct TerminalResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  std::string screen;  // what reached the terminal (output post-processing and echo off: raw bytes)
  std::string err;
};

// argv[0] is a path. `input` is typed on the terminal at the start.
TerminalResult run_on_terminal(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                               unsigned short columns, const std::string& input = "", int timeout_ms = 30000);

}  // namespace gpureap::test
