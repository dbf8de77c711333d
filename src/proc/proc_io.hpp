// Low-level reads relative to directory fds, into one reused buffer, and the one owned-fd
// type of gpureap (unique_fd). Every call reports failure with errno set, so callers can tell
// "gone" (ENOENT, ESRCH) from "denied" (EACCES, EPERM).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace gpureap::procfs {

// An owned file descriptor, closed on destruction. The only fd wrapper: use it everywhere.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {}
  unique_fd& operator=(unique_fd&& other) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd();

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

// Writes all of data to fd, retrying short writes and EINTR. Returns 0 or the errno
// (EIO for a write that made no progress).
int write_all(int fd, std::string_view data);

// A file gpureap writes at a path someone gave it (an audit log, a report), as root perhaps,
// in a directory others may write to (/tmp). Refused, with the reason in `why`, unless it is a
// regular file (a FIFO would hang the open, /dev/full eat the report) with one link (a hard
// link planted to /etc/passwd would be written through) that belongs to us (another user's
// file would receive what we write, readable by them). Created 0600 when missing; a symlink
// is never followed. Truncate empties it only once those checks passed.
enum class OutputMode { Append, Truncate };
unique_fd open_output_file(const std::string& path, OutputMode mode, std::string& why);
// "" when open_output_file would open `path`, else its `why`; creates and changes nothing
// (watch --check-config asks what the daemon would refuse).
std::string output_file_problem(const std::string& path);

// Who may have written a file gpureap reads. A file that defines what root does (watch's
// policy names a command root runs; the kill configuration says what is protected; the
// exporter's web-config who may read the node) is trusted as sshd's StrictModes trusts a
// user's keys: it, and the directory it is in, belong to root or to the user running gpureap,
// and neither is writable by group or others (a directory with the sticky bit, /tmp, may be:
// there nobody else can replace the file).
enum class FileTrust { Anyone, RootOrInvoker };

// The text of a configuration-like file, read only from a regular file of at most max_bytes:
// a FIFO, a device such as /dev/zero or a directory is an error, never a hang or silence.
// nullopt with one line in `error` that names the file as "<what> <path>" ("configuration
// file /etc/gpureap/config.toml is not a regular file"; "policy file /tmp/p.toml is writable
// by group or others (mode 0664): ...").
std::optional<std::string> read_bounded_file(const std::string& path, std::size_t max_bytes, std::string_view what,
                                             std::string& error, FileTrust trust = FileTrust::Anyone);

// Empty when the opened file `fd` (named `path` to a person) and its directory are trusted as
// FileTrust::RootOrInvoker says; otherwise one phrase, "is writable by group or others (mode
// 0664): chmod go-w it", to follow "<what> <path> ".
std::string untrusted_file_reason(int fd, const std::string& path);

// openat(dirfd, name, O_RDONLY|O_DIRECTORY|O_CLOEXEC), plus O_NOFOLLOW when asked.
unique_fd open_dir_at(int dirfd, const char* name, bool no_follow);

// Whether errno says the thing we were reading has disappeared (the process exited).
bool errno_means_gone();
bool errno_means_denied();

// Root was denied PID 1 alone: the init of a sandbox outside our reach (seen on CI-like VMs
// and on a real GPU VM). Init holds no GPU and no /dev/shm names, so that denial hides nothing
// from checks that must otherwise assume a process they cannot read might hold something.
bool denial_hides_nothing(pid_t pid);

// A growable byte buffer reused for every read of a scan, so that reading a file costs no
// allocation once the buffer has grown to the largest file seen.
class ReadBuffer {
 public:
  explicit ReadBuffer(std::size_t initial_capacity = 4096);

  // The whole file `name` relative to dirfd, valid until the next call; nullopt on error.
  // Files larger than max_size are cut at max_size.
  std::optional<std::string_view> read_file_at(int dirfd, const char* name,
                                               std::size_t max_size = 16u << 20);
  // For procfs files generated in one piece (stat, status): a read that does not fill the
  // buffer returned the whole file, so the read that would return 0 is skipped.
  std::optional<std::string_view> read_proc_file_at(int dirfd, const char* name,
                                                    std::size_t max_size = 1u << 20);
  // The beginning of `name`, read up to the first `needle` (the rest is left unread), or the
  // whole file when it has none; cut at max_size.
  std::optional<std::string_view> read_file_until_at(int dirfd, const char* name,
                                                     std::string_view needle,
                                                     std::size_t max_size = 16u << 20);
  // The target of the symbolic link `name` relative to dirfd; nullopt on error.
  std::optional<std::string_view> read_link_at(int dirfd, const char* name);
  // A procfs file kept open, read again from its start: `one_piece` as read_proc_file_at
  // (stat), else read until the end (children, made a page at a time).
  std::optional<std::string_view> read_kept_proc_file(int fd, bool one_piece, std::size_t max_size = 1u << 20);

 private:
  void grow(std::size_t at_least);
  std::optional<std::string_view> read_at(int dirfd, const char* name, std::size_t max_size,
                                          bool short_read_is_end, std::string_view needle = {});
  std::optional<std::string_view> read_whole(int fd, std::size_t max_size, bool short_read_is_end,
                                             std::string_view needle, bool positional);

  std::unique_ptr<char[]> data_;
  std::size_t capacity_;
};

// Calls fn(const char* name, unsigned char d_type) -> bool for each entry of the open
// directory, "." and ".." excluded, with getdents64 into a reused buffer; fn returns false
// to stop early. False when listing failed (errno set); entries seen before the failure
// have been passed to fn.
class DirLister {
 public:
  DirLister();
  // short_batch_is_end: the directory is on procfs, which fills each getdents64 batch until
  // the buffer is full or the entries run out; a batch with room left was the last one.
  template <typename Fn>
  bool for_each(int dirfd, Fn&& fn, bool short_batch_is_end = false);

 private:
  static constexpr long kBufferSize = 32 * 1024;
  static constexpr long kMaxRecordSize = 24 + 256;  // struct dirent64 with a 255-byte name

  // One getdents64 call: bytes placed in the buffer, 0 at the end, -1 on error.
  long fill(int dirfd);
  std::unique_ptr<char[]> data_;
};

struct DirEntryView {
  const char* name;
  unsigned char type;
  unsigned short record_length;
};
DirEntryView entry_at(const char* record);

template <typename Fn>
bool DirLister::for_each(int dirfd, Fn&& fn, bool short_batch_is_end) {
  for (bool more = true; more;) {
    const long filled = fill(dirfd);
    if (filled < 0) return false;
    if (filled == 0) return true;
    more = !short_batch_is_end || filled > kBufferSize - kMaxRecordSize;
    for (long offset = 0; offset < filled;) {
      const DirEntryView entry = entry_at(data_.get() + offset);
      offset += entry.record_length;
      const char* n = entry.name;
      if (n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'))) continue;
      if (!fn(n, entry.type)) return true;
    }
  }
  return true;
}

}  // namespace gpureap::procfs
