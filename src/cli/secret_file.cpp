#include "cli/secret_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "proc/proc_io.hpp"

namespace gpureap {
namespace {

constexpr std::size_t kMaxSecretFileBytes = 4096;

}  // namespace

std::optional<std::string> read_secret_file(const std::string& path, std::string& why) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  procfs::unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    why = std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a regular file";
    return std::nullopt;
  }
  if (st.st_size > static_cast<off_t>(kMaxSecretFileBytes)) {
    why = "larger than 4 KiB: not a password file";
    return std::nullopt;
  }
  std::string text(kMaxSecretFileBytes, '\0');
  std::size_t length = 0;
  while (length < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + length, text.size() - length);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = std::strerror(errno);
      return std::nullopt;
    }
    if (n == 0) break;
    length += static_cast<std::size_t>(n);
  }
  text.resize(length);
  text = text.substr(0, text.find('\n'));
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty()) {
    why = "its first line is empty";
    return std::nullopt;
  }
  return text;
}

}  // namespace gpureap
