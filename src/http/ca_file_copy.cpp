#include "http/ca_file_copy.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

// Closes a descriptor at the end of a scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

bool write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

std::optional<CaFileCopy> CaFileCopy::make(const std::string& path, std::string& error) {
  const std::string shown = sanitize_for_terminal(path);
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  const FdCloser source{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (source.fd < 0) {
    error = fmt::format("the CA file {}: cannot open it: {}", shown, std::strerror(errno));
    return std::nullopt;
  }
  struct stat info {};
  if (::fstat(source.fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    error = fmt::format("the CA file {} is not a regular file", shown);
    return std::nullopt;
  }
  if (info.st_size > kMaxCaFileBytes) {
    error = fmt::format("the CA file {} is larger than {} bytes", shown, kMaxCaFileBytes);
    return std::nullopt;
  }
  FdCloser copy{static_cast<int>(::memfd_create("gpureap-ca-file", MFD_CLOEXEC))};
  if (copy.fd < 0) {
    error = fmt::format("the CA file {}: cannot copy it: {}", shown, std::strerror(errno));
    return std::nullopt;
  }
  // Bounded even when the file grows while it is read (a /proc file's size says 0).
  char buffer[16384];
  long long total = 0;
  for (;;) {
    const ssize_t n = ::read(source.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = fmt::format("the CA file {}: cannot read it: {}", shown, std::strerror(errno));
      return std::nullopt;
    }
    if (n == 0) break;
    total += n;
    if (total > kMaxCaFileBytes) {
      error = fmt::format("the CA file {} is larger than {} bytes", shown, kMaxCaFileBytes);
      return std::nullopt;
    }
    if (!write_all(copy.fd, buffer, static_cast<std::size_t>(n))) {
      error = fmt::format("the CA file {}: cannot copy it: {}", shown, std::strerror(errno));
      return std::nullopt;
    }
  }
  const int fd = std::exchange(copy.fd, -1);
  return CaFileCopy(fd);
}

CaFileCopy::CaFileCopy(CaFileCopy&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

CaFileCopy& CaFileCopy::operator=(CaFileCopy&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

CaFileCopy::~CaFileCopy() {
  if (fd_ >= 0) ::close(fd_);
}

std::string CaFileCopy::path() const { return fmt::format("/proc/self/fd/{}", fd_); }

}  // namespace gpureap
