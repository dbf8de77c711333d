// A password read from a file (`fleet --password-file`), never from the command line, where
// every user can read it in /proc/<pid>/cmdline.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace gpureap {

inline constexpr std::size_t kMaxSecretFileBytes = 4096;

// The first line of `path` without its line ending, read by procfs::read_bounded_file. nullopt,
// with one line in `error` ("--password-file <path> is not a regular file"; unsanitised), when
// the file cannot be opened, is not a regular file (a FIFO would block, a directory or
// /dev/zero has no first line), is larger than kMaxSecretFileBytes, or its first line is empty.
std::optional<std::string> read_secret_file(const std::string& path, std::string& error);

}  // namespace gpureap
