#include "cli/fleet/secret_file.hpp"

#include "proc/proc_io.hpp"

namespace gpureap {

std::optional<std::string> read_secret_file(const std::string& path, std::string& error) {
  auto text = procfs::read_bounded_file(path, kMaxSecretFileBytes, "--password-file", error);
  if (!text) return std::nullopt;
  *text = text->substr(0, text->find('\n'));
  if (!text->empty() && text->back() == '\r') text->pop_back();
  if (text->empty()) {
    error = "--password-file " + path + ": its first line is empty";
    return std::nullopt;
  }
  return text;
}

}  // namespace gpureap
