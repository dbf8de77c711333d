#include "doctor/kernel_log.hpp"

#include <cerrno>
#include <chrono>
#include <algorithm>
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

void LineSplitter::feed(std::string_view chunk, KernelLogRead& out) {
  while (!chunk.empty()) {
    const std::size_t newline = chunk.find('\n');
    const std::string_view piece = chunk.substr(0, newline);
    if (partial_.size() < kMaxLineLength) partial_.append(piece.substr(0, kMaxLineLength - partial_.size()));
    if (newline == std::string_view::npos) return;
    take_line(partial_, out);
    partial_.clear();
    chunk.remove_prefix(newline + 1);
  }
}

void LineSplitter::finish(KernelLogRead& out) {
  if (!partial_.empty()) take_line(partial_, out);
  partial_.clear();
}

KernelLogRead scan_kernel_log_text(std::string_view text, std::string source) {
  KernelLogRead out;
  out.source = std::move(source);
  LineSplitter lines;
  lines.feed(text, out);
  lines.finish(out);
  return out;
}

std::string unread_part_text(const KernelLogRead& read) {
  if (read.bytes_unread == 0) return {};
  return fmt::format("{}: read lines 1 to {} ({} of {} bytes); its last {} bytes are not read", read.source,
                     read.lines_read, read.bytes_read, read.bytes_read + read.bytes_unread, read.bytes_unread);
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

// Feeds the bytes from `start` on (at most max_bytes, for at most kKernelLogReadSeconds)
// into `lines`. Returns the offset where reading stopped.
std::uint64_t read_lines_from(int fd, const std::string& path, std::uint64_t start, std::uint64_t max_bytes,
                              LineSplitter& lines, KernelLogRead& out) {
  if (start > 0 && ::lseek(fd, static_cast<off_t>(start), SEEK_SET) != static_cast<off_t>(start)) {
    out.error = fmt::format("cannot seek in kernel log file {}: {}", path, errno_text(errno));
    return start;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kKernelLogReadSeconds);
  std::uint64_t total = 0;
  std::vector<char> buffer(kFileChunkSize);
  while (total < max_bytes && std::chrono::steady_clock::now() < deadline) {
    const ssize_t got = ::read(fd, buffer.data(), static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), max_bytes - total)));
    if (got < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      out.error = fmt::format("reading kernel log file {} failed after {} lines: {}", path, out.lines_read, errno_text(err));
      break;
    }
    if (got == 0) break;
    total += static_cast<std::uint64_t>(got);
    lines.feed(std::string_view(buffer.data(), static_cast<std::size_t>(got)), out);
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
  // A saved file is complete: its last line counts even without a newline.
  KernelLogFollower follower(KernelLogFollower::Kind::SavedFile, path, kUnlimitedKernelLogBytes);
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

KernelLogFollower::KernelLogFollower(Kind kind, std::string path, std::uint64_t history_bytes)
    : kind_(kind), path_(std::move(path)), history_bytes_(history_bytes) {}

KernelLogRead KernelLogFollower::read_new(const XidSink& sink) {
  const XidSink* to = sink ? &sink : nullptr;
  return kind_ == Kind::Kmsg && !kmsg_is_file_ ? read_new_kmsg(to) : read_file(false, to);
}

KernelLogRead KernelLogFollower::read_new_kmsg(const XidSink* sink) {
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
      return read_file(false, sink);
    }
  }
  out.sink = sink;
  out.lines_read = lines_;
  read_kmsg_records(kmsg_.get(), path_, out);
  out.sink = nullptr;  // the caller's, valid during the call only
  lines_ = out.lines_read;
  return out;
}

KernelLogRead KernelLogFollower::read_file(bool to_the_end, const XidSink* sink) {
  KernelLogRead out;
  out.source = path_;
  struct stat st {};
  const procfs::unique_fd fd = open_saved_log(path_, st, out);
  if (!fd) return out;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (!file_seen_ || st.st_dev != device_ || st.st_ino != inode_ || size < offset_) {
    // New, replaced or truncated (rotation): from its first line.
    file_seen_ = true;
    whole_read_ = false;
    device_ = st.st_dev;
    inode_ = st.st_ino;
    offset_ = 0;
    lines_ = 0;
    splitter_.reset();
  }
  const std::uint64_t max_bytes = whole_read_ ? kMaxKernelLogGrowthBytes : history_bytes_;
  out.sink = sink;
  out.lines_read = lines_;
  offset_ = read_lines_from(fd.get(), path_, offset_, max_bytes, splitter_, out);
  out.bytes_read = offset_;
  out.bytes_unread = size > offset_ ? size - offset_ : 0;
  if (out.bytes_unread == 0 && !out.error) {
    whole_read_ = true;
    if (to_the_end) splitter_.finish(out);
  }
  out.sink = nullptr;  // the caller's, valid during the call only
  lines_ = out.lines_read;
  return out;
}

}  // namespace gpureap
