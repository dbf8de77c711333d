// Small POSIX file helpers shared by the library, the control program and the CUDA program.
// All descriptors are O_CLOEXEC; failures come back as values carrying errno's text.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"

namespace gpusim {

// Whole-file read. A missing file is an error whose `missing` flag is set.
struct ReadError {
  std::string message;
  bool missing = false;
};
struct ReadResult {
  std::string data;
  ReadError error;
  bool ok() const { return error.message.empty(); }
};
ReadResult read_file(const std::string& path);

// Writes `data` to a temporary file beside `path` and renames it into place, so readers see
// the old content or the new, never a torn one. `mode` is applied with fchmod (umask-proof).
Status write_file_atomic(const std::string& path, const std::string& data, unsigned mode);

// Opens `path` read-write; a missing one is made first with `mode` already set (a temporary
// file beside it, fchmod'ed and linked into place), so that no other program ever finds it
// with its maker's umask's mode, as open(O_CREAT) and a later fchmod would leave it for a
// moment. An existing file is opened as it is, never replaced. The descriptor is the caller's.
Result<int> open_or_create_shared(const std::string& path, unsigned mode);

// mkdir that accepts an existing directory; `mode` applied with chmod (umask-proof).
Status make_dir(const std::string& path, unsigned mode);

// mkdir(0755) that accepts an existing directory and leaves its mode alone.
Status make_dir_if_missing(const std::string& path);

// Creates the file empty if missing (existing content is kept) and sets `mode`.
Status touch_file(const std::string& path, unsigned mode);

// A simulated device file at `path` (which must not exist), `mode` set. As root, a character
// device with /dev/null's numbers (1:3): programs that accept only device nodes (slurmd's GRES
// files, a container runtime's device list) take it, and opening it is as harmless as opening
// /dev/null. Where no node can be made or opened (not root, no CAP_MKNOD, a nodev mount), an
// empty regular file. Readers tell the files apart by path, never by their numbers.
Status make_device_file(const std::string& path, unsigned mode);

// Removes a directory tree; a missing path is success.
Status remove_tree(const std::string& path);

// Names in a directory, without "." and "..". A missing directory is an empty list.
Result<std::vector<std::string>> list_dir(const std::string& path);

// The same with each name's inode number (from the directory itself, no stat).
struct DirEntry {
  std::string name;
  unsigned long long ino = 0;
};
Result<std::vector<DirEntry>> list_dir_entries(const std::string& path);

// A descriptor closed with its owner; move-only.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  OwnedFd(OwnedFd&& other) noexcept : fd_(other.release()) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd();
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// errno as text, for messages.
std::string errno_text(int err);

// Random lowercase hex string of 2*bytes characters (getrandom).
std::string random_hex(unsigned bytes);

}  // namespace gpusim
