// Reading the kernel log for Xid events: live from /dev/kmsg, or from a file a person saved
// (dmesg, dmesg -T, journalctl -k, journalctl -o short-iso, a raw /dev/kmsg dump), which is
// also how doctor works where /dev/kmsg is closed to non-root users (dmesg_restrict).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/xid_event.hpp"
#include "proc/proc_io.hpp"

namespace gpureap {

// Where a reader streaming a log hands each Xid event, in log order (line_number set), instead
// of keeping them: memory then stays bounded however many Xid lines a log holds.
using XidSink = std::function<void(XidEvent&&)>;

struct KernelLogRead {
  std::string source;                // "/dev/kmsg" or the file path
  std::size_t lines_read = 0;        // log lines (kmsg: records) seen, Xid or not
  std::vector<XidEvent> events;      // in log order, line_number set; empty when a sink took them
  const XidSink* sink = nullptr;     // set: each event goes there rather than to `events`
  std::optional<std::string> error;  // what went wrong, for a person: path, errno text, what to do
  bool truncated = false;            // kmsg records were overwritten before we read them (EPIPE)
};

// Every line of a saved log. A missing or unreadable file, or anything but a regular file
// (a FIFO, /dev/zero, a directory: endless or meaningless), is an error value naming the
// path. At most the last kMaxKernelLogBytes are read, and for at most kKernelLogReadSeconds.
inline constexpr std::size_t kMaxKernelLogBytes = 64u << 20;
inline constexpr double kKernelLogReadSeconds = 30;
// What a KernelLogFollower reads a call after its first: a log growing faster is read in its
// newest part, so that a flood (or a line that never ends) cannot make a look take seconds.
inline constexpr std::size_t kMaxKernelLogGrowthBytes = 1u << 20;
KernelLogRead read_kernel_log_file(const std::string& path);
KernelLogRead read_kernel_log_file(const std::string& path, const XidSink& sink);

// "" when path can be read as a saved kernel log, else the reason in one line (what doctor
// says before it exits 11). Never blocks: a FIFO is opened without waiting for a writer.
std::string kernel_log_file_problem(const std::string& path);

// The records /dev/kmsg holds now, oldest first, without waiting for new ones. A regular
// file given as path is read as a saved log (one record per line), for tests and replays.
KernelLogRead read_kmsg(const std::string& path = "/dev/kmsg");
KernelLogRead read_kmsg(const std::string& path, const XidSink& sink);

// The lines of `text` as read_kernel_log_file reads a file's; for logs already in memory.
KernelLogRead scan_kernel_log_text(std::string_view text, std::string source);

// A kernel log read as it grows (the exporter's Xid counters): each read_new() returns what
// was logged since the previous call, everything the log holds on the first. /dev/kmsg stays
// open between calls. A saved file is opened again each time and read from where the last
// call stopped, whole lines only (a line being written is taken next time), and from its start
// when it was replaced or truncated (log rotation); at most kMaxKernelLogBytes on the first
// call and after a replacement, kMaxKernelLogGrowthBytes on the others, the newest. Line numbers
// count from the first read. An error leaves the position as it was.
class KernelLogFollower {
 public:
  enum class Kind { Kmsg, SavedFile };
  KernelLogFollower(Kind kind, std::string path);

  KernelLogRead read_new();
  const std::string& path() const { return path_; }

 private:
  friend KernelLogRead read_kernel_log_file(const std::string& path, const XidSink& sink);
KernelLogRead read_kernel_log_file(const std::string& path, const XidSink& sink);
  KernelLogRead read_new_kmsg();
  // A saved file from where the last call stopped; to_the_end takes a last line without a
  // newline too (a file known to be complete). Events go to `sink` when it is given.
  KernelLogRead read_file(bool to_the_end, const XidSink* sink = nullptr);

  Kind kind_;
  std::string path_;
  procfs::unique_fd kmsg_;
  bool kmsg_is_file_ = false;  // a regular file given as the kmsg path (tests): read as saved
  bool file_seen_ = false;
  std::uint64_t device_ = 0, inode_ = 0;
  std::uint64_t offset_ = 0;  // the end of the last whole line read
  std::size_t lines_ = 0;
};

}  // namespace gpureap
