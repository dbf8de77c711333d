// The command line of gpureap: parses argv, runs the command named (ps when none is) and returns
// its exit status (docs/exit-codes.md).
#pragma once

namespace gpureap {

int run_command_line(int argc, char** argv);

}  // namespace gpureap
