// The commands that show where a stuck process is, named by `run` (which runs them before it
// kills a hung job) and by `doctor` (which suggests them): py-spy for Python processes (with
// --nonblocking it reads the stacks without stopping the process, so it works even on one in
// uninterruptible sleep), gdb for the others (ptrace attach waits while a process is in D).
#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

namespace gpureap {

bool looks_like_python(const std::string& exe_basename);  // python, python3, python3.11 ...
std::vector<std::string> py_spy_command(pid_t pid, bool nonblocking);
std::vector<std::string> gdb_command(pid_t pid);
// For a person: the words joined with spaces, the gdb -ex argument quoted.
std::string command_line(const std::vector<std::string>& argv);

}  // namespace gpureap
