#include "doctor/kernel_log.hpp"

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <system_error>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "proc/proc_io.hpp"

namespace gpureap {
namespace {

// /dev/kmsg fails a read whose buffer is smaller than the record (EINVAL); records are at
// most about 8 KiB (the kernel's limit on one message plus its dictionary).
constexpr std::size_t kKmsgBufferSize = 16 * 1024;
constexpr std::size_t kFileChunkSize = 64 * 1024;
// A line longer than this is cut: a binary file without newlines must not fill memory.
constexpr std::size_t kMaxLineLength = 64 * 1024;
// A guard against a kernel that logs faster than we read: stop after this many reads.
constexpr std::size_t kMaxKmsgRecords = 4u << 20;

std::string errno_text(int err) { return std::system_category().message(err); }

int open_cloexec(const std::string& path, int flags) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

// A /dev/kmsg continuation line (" SUBSYSTEM=pci", " DEVICE=+pci:0000:05:00.0"): the
// record's dictionary, never log text.
bool is_continuation(std::string_view line) {
  if (line.empty() || line.front() != ' ') return false;
  std::size_t i = 1;
  while (i < line.size() && ((line[i] >= 'A' && line[i] <= 'Z') || line[i] == '_')) ++i;
  return i > 1 && i < line.size() && line[i] == '=';
}

void take_line(std::string_view line, KernelLogRead& out) {
  ++out.lines_read;
  if (is_continuation(line)) return;
  if (auto event = parse_xid_line(line)) {
    event->line_number = out.lines_read;
    if (out.sink != nullptr) {
      (*out.sink)(std::move(*event));
    } else {
      out.events.push_back(std::move(*event));
    }
  }
}

// Splits a stream into lines across read boundaries.
class LineSplitter {
 public:
  explicit LineSplitter(KernelLogRead& out) : out_(out) {}

  void feed(std::string_view chunk) {
    while (!chunk.empty()) {
      const std::size_t newline = chunk.find('\n');
      const std::string_view piece = chunk.substr(0, newline);
      if (partial_.size() < kMaxLineLength)
        partial_.append(piece.substr(0, kMaxLineLength - partial_.size()));
      if (newline == std::string_view::npos) {
        pending_ += piece.size();
        return;
      }
      take_line(partial_, out_);
      partial_.clear();
      pending_ = 0;
      chunk.remove_prefix(newline + 1);
    }
  }

  void finish() {
    if (!partial_.empty()) take_line(partial_, out_);
    partial_.clear();
    pending_ = 0;
  }

  // Bytes of the line not yet ended by a newline (as fed, before the length cut).
  std::uint64_t pending() const { return pending_; }

 private:
  KernelLogRead& out_;
  std::string partial_;
  std::uint64_t pending_ = 0;
};

std::string kmsg_open_error(const std::string& path, int err) {
  if (err == EACCES || err == EPERM) {
    return fmt::format(
        "cannot read {}: {} (kernel.dmesg_restrict keeps the kernel log from non-root users); "
        "run gpureap as root, or save the log with `journalctl -k > kernel.log` and pass "
        "--kernel-log kernel.log",
        path, errno_text(err));
  }
  return fmt::format(
      "cannot read {}: {}; pass --kernel-log FILE with the output of `journalctl -k`", path,
      errno_text(err));
}

}  // namespace

KernelLogRead scan_kernel_log_text(std::string_view text, std::string source) {
  KernelLogRead out;
  out.source = std::move(source);
  LineSplitter lines(out);
  lines.feed(text);
  lines.finish();
  return out;
}

std::string kernel_log_file_problem(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer.
  const int fd = open_cloexec(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    return fmt::format("{}: cannot read it: {} (save the log first, e.g. journalctl -k > kernel.log, or dmesg > "
                       "kernel.log)",
                       path, errno_text(errno));
  }
  const procfs::unique_fd closer(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return fmt::format("cannot inspect kernel log file {}: {}", path, errno_text(errno));
  if (S_ISREG(st.st_mode)) return {};
  const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a pipe (it may never end)"
                     : S_ISCHR(st.st_mode)  ? "a character device (it may never end)"
                                            : "not a regular file";
  return fmt::format("{} is {}, not a saved kernel log: save the log to a file first, e.g. journalctl -k > kernel.log",
                     path, what);
}

namespace {

// A saved log opened for reading, or no descriptor and the reason in out.error.
procfs::unique_fd open_saved_log(const std::string& path, struct stat& st, KernelLogRead& out) {
  if (std::string problem = kernel_log_file_problem(path); !problem.empty()) {
    out.error = std::move(problem);
    return {};
  }
  procfs::unique_fd fd(open_cloexec(path, O_RDONLY | O_NONBLOCK));
  if (!fd) {
    out.error = fmt::format("cannot read kernel log file {}: {}", path, errno_text(errno));
    return {};
  }
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {  // replaced since the check
    out.error = fmt::format("kernel log file {} is not a regular file", path);
    return {};
  }
  return fd;
}

// Feeds the lines from `start` to the end of the file (at most max_bytes, for at most
// kKernelLogReadSeconds) into `lines`; the first, partial one is skipped when start is not a
// line start. Returns the offset where reading stopped.
std::uint64_t read_lines_from(int fd, const std::string& path, std::uint64_t start, bool skip_partial_line,
                              std::uint64_t max_bytes, LineSplitter& lines, KernelLogRead& out) {
  if (start > 0 && ::lseek(fd, static_cast<off_t>(start), SEEK_SET) != static_cast<off_t>(start)) {
    out.error = fmt::format("cannot seek in kernel log file {}: {}", path, errno_text(errno));
    return start;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kKernelLogReadSeconds);
  std::size_t total = 0;
  std::vector<char> buffer(kFileChunkSize);
  for (;;) {
    if (total >= max_bytes) break;  // a file still growing: stop at the bound
    if (std::chrono::steady_clock::now() > deadline) {
      out.error = fmt::format("reading kernel log file {} took longer than {:.0f} s; stopped after {} lines", path,
                              kKernelLogReadSeconds, out.lines_read);
      break;
    }
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      out.error = fmt::format("reading kernel log file {} failed after {} lines: {}", path,
                              out.lines_read, errno_text(err));
      break;
    }
    if (got == 0) break;
    total += static_cast<std::size_t>(got);
    std::string_view chunk(buffer.data(), static_cast<std::size_t>(got));
    if (skip_partial_line) {
      const std::size_t newline = chunk.find('\n');
      if (newline == std::string_view::npos) continue;
      chunk.remove_prefix(newline + 1);
      skip_partial_line = false;
    }
    lines.feed(chunk);
  }
  return start + total;
}

// Each read() of /dev/kmsg returns exactly one record: "prio,seq,usec,flags;text\n" and
// dictionary lines after it, which we drop. Reads until no record is left (EAGAIN).
void read_kmsg_records(int fd, const std::string& path, KernelLogRead& out) {
  std::vector<char> buffer(kKmsgBufferSize);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kKernelLogReadSeconds);
  for (std::size_t reads = 0; reads < kMaxKmsgRecords; ++reads) {
    if ((reads & 1023) == 0 && std::chrono::steady_clock::now() > deadline) {
      out.error = fmt::format("reading {} took longer than {:.0f} s; stopped after {} records", path,
                              kKernelLogReadSeconds, out.lines_read);
      break;
    }
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN || err == EWOULDBLOCK) break;
      if (err == EPIPE) {  // records were overwritten; the next read gives the oldest left
        out.truncated = true;
        continue;
      }
      out.error = fmt::format("reading {} failed after {} records: {}", path, out.lines_read,
                              errno_text(err));
      break;
    }
    if (got == 0) break;
    const std::string_view record(buffer.data(), static_cast<std::size_t>(got));
    take_line(record.substr(0, record.find('\n')), out);
  }
}

}  // namespace

KernelLogRead read_kernel_log_file(const std::string& path, const XidSink& sink) {
  // The newest part is what matters: the last kMaxKernelLogBytes, from a line start; a saved
  // file is complete, so its last line counts even without a newline.
  KernelLogFollower follower(KernelLogFollower::Kind::SavedFile, path);
  return follower.read_file(true, sink ? &sink : nullptr);
}

KernelLogRead read_kernel_log_file(const std::string& path) { return read_kernel_log_file(path, XidSink{}); }

KernelLogRead read_kmsg(const std::string& path) { return read_kmsg(path, XidSink{}); }

KernelLogRead read_kmsg(const std::string& path, const XidSink& sink) {
  KernelLogRead out;
  out.source = path;
  out.sink = sink ? &sink : nullptr;
  // O_NONBLOCK: at the end of the buffer read() says EAGAIN instead of waiting for news.
  const procfs::unique_fd fd(open_cloexec(path, O_RDONLY | O_NONBLOCK));
  if (!fd) {
    out.error = kmsg_open_error(path, errno);
    return out;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0 && !S_ISCHR(st.st_mode)) return read_kernel_log_file(path, sink);
  read_kmsg_records(fd.get(), path, out);
  out.sink = nullptr;
  return out;
}

KernelLogFollower::KernelLogFollower(Kind kind, std::string path) : kind_(kind), path_(std::move(path)) {}

KernelLogRead KernelLogFollower::read_new() {
  return kind_ == Kind::Kmsg && !kmsg_is_file_ ? read_new_kmsg() : read_file(false);
}

KernelLogRead KernelLogFollower::read_new_kmsg() {
  KernelLogRead out;
  out.source = path_;
  if (!kmsg_) {
    // O_NONBLOCK: at the end of the buffer read() says EAGAIN instead of waiting for news.
    kmsg_ = procfs::unique_fd(open_cloexec(path_, O_RDONLY | O_NONBLOCK));
    if (!kmsg_) {
      out.error = kmsg_open_error(path_, errno);
      return out;
    }
    struct stat st {};
    if (::fstat(kmsg_.get(), &st) == 0 && !S_ISCHR(st.st_mode)) {
      kmsg_ = procfs::unique_fd();
      kmsg_is_file_ = true;
      return read_file(false);
    }
  }
  out.lines_read = lines_;
  read_kmsg_records(kmsg_.get(), path_, out);
  lines_ = out.lines_read;
  return out;
}

KernelLogRead KernelLogFollower::read_file(bool to_the_end, const XidSink* sink) {
  KernelLogRead out;
  out.source = path_;
  out.sink = sink;
  struct stat st {};
  const procfs::unique_fd fd = open_saved_log(path_, st, out);
  if (!fd) return out;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const bool replaced = !file_seen_ || st.st_dev != device_ || st.st_ino != inode_ || size < offset_;
  std::uint64_t start = replaced ? 0 : offset_;
  const std::uint64_t max_bytes = replaced ? kMaxKernelLogBytes : kMaxKernelLogGrowthBytes;
  bool skip_partial_line = false;
  if (size - start > max_bytes) {  // more than one read's worth: the newest part
    start = size - max_bytes;
    skip_partial_line = true;
  }
  out.lines_read = lines_;
  LineSplitter lines(out);
  const std::uint64_t end = read_lines_from(fd.get(), path_, start, skip_partial_line, max_bytes, lines, out);
  if (to_the_end) lines.finish();
  out.sink = nullptr;  // the caller's, valid during the call only
  if (out.error) return out;
  file_seen_ = true;
  device_ = st.st_dev;
  inode_ = st.st_ino;
  offset_ = end - lines.pending();  // a line still being written is read whole next time
  lines_ = out.lines_read;
  return out;
}

}  // namespace gpureap
