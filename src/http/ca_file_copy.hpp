// A private copy of a CA file for OpenSSL to read. OpenSSL opens the path it is given with a
// blocking fopen() and reads it to the end: a FIFO put there after the policy was checked
// would hang the delivery (and the daemon's stop) for ever, /dev/urandom would be read
// without end. The file is read here instead, without waiting and within a size bound, into a
// memfd that no one else can change; OpenSSL reads /proc/self/fd/N.
#pragma once

#include <optional>
#include <string>

namespace gpureap {

// Debian's whole bundle of public CAs is about 220 KiB.
inline constexpr long long kMaxCaFileBytes = 4ll << 20;

class CaFileCopy {
 public:
  // The copy, or nullopt and one line in `error` naming the path (sanitised): it cannot be
  // opened, is not a regular file, or is larger than kMaxCaFileBytes.
  static std::optional<CaFileCopy> make(const std::string& path, std::string& error);
  CaFileCopy(CaFileCopy&& other) noexcept;
  CaFileCopy& operator=(CaFileCopy&& other) noexcept;
  CaFileCopy(const CaFileCopy&) = delete;
  CaFileCopy& operator=(const CaFileCopy&) = delete;
  ~CaFileCopy();

  // "/proc/self/fd/N": valid while this object lives.
  std::string path() const;

 private:
  explicit CaFileCopy(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace gpureap
