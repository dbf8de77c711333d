// A password read from a file (`fleet --password-file`), never from the command line, where
// every user can read it in /proc/<pid>/cmdline.
#pragma once

#include <optional>
#include <string>

namespace gpureap {

// The first line of `path` without its line ending. nullopt, with one phrase in `why`, when the
// file cannot be opened, is not a regular file (a FIFO would block, a directory or /dev/zero
// has no first line), is larger than 4 KiB, or its first line is empty.
std::optional<std::string> read_secret_file(const std::string& path, std::string& why);

}  // namespace gpureap
