// Finding and opening the file of a program gpureap runs itself. The file is opened once and
// checked on that descriptor; the start execs the descriptor (process_start.hpp), so a symlink
// or a directory entry swapped after the check cannot make it run another file.
#pragma once

#include <string>

#include "proc/proc_io.hpp"

namespace gpureap {

// An executable regular file: `name` itself when it is an absolute path, else the first in an
// absolute PATH entry of gpureap's environment (the default PATH when unset). "" when there is
// none: a relative path ("./x", "bin/x") or a relative PATH entry ("." or "") is never used.
std::string find_executable(const std::string& name);

// Opens `path` (O_PATH, close-on-exec) and checks, on the descriptor, that it is a regular
// file someone may execute. An invalid descriptor with one phrase in `why` otherwise
// ("/usr/bin/gdb: Permission denied", "/tmp/x is not a regular file").
procfs::unique_fd open_program(const std::string& path, std::string& why);

// The same check on a descriptor someone else opened ("" when it passes), naming it `name`.
std::string program_file_problem(int fd, const std::string& name);

}  // namespace gpureap
