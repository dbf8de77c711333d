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
  // A saved file: its bytes read so far (by a follower, in all its calls since the file was
  // new) and those after them that this call left unread (stopped by kKernelLogReadSeconds or,
  // after a follower's first call, by kMaxKernelLogGrowthBytes); the next call goes on there.
  std::uint64_t bytes_read = 0;
  std::uint64_t bytes_unread = 0;
};

// Part of a line for a person when a read of a saved file stopped short: which lines were
// read and how much is left ("" when it read to the end).
std::string unread_part_text(const KernelLogRead& read);

// Every line of a saved log, in constant memory when events go to a sink, from its first line
// (line numbers are the file's own). A missing or unreadable file, or anything but a regular
// file (a FIFO, /dev/zero, a directory: endless or meaningless), is an error value naming the
// path. Reading stops after kKernelLogReadSeconds; bytes_unread then says what is left.
inline constexpr double kKernelLogReadSeconds = 30;
// What a KernelLogFollower reads a call: of a log's history (before it has been read to its
// end once), then of what it gained. A longer log is read over several calls (counted late,
// never skipped), so that a huge history or a flood cannot make one of watch's looks take
// seconds.
inline constexpr std::uint64_t kMaxKernelLogHistoryBytes = 64u << 20;
inline constexpr std::uint64_t kMaxKernelLogGrowthBytes = 4u << 20;
inline constexpr std::uint64_t kUnlimitedKernelLogBytes = ~std::uint64_t{0};
KernelLogRead read_kernel_log_file(const std::string& path);
KernelLogRead read_kernel_log_file(const std::string& path, const XidSink& sink);

// "" when path can be read as a saved kernel log, else the reason in one line (what doctor
// says before it exits 11). Never blocks: a FIFO is opened without waiting for a writer.
std::string kernel_log_file_problem(const std::string& path);

// The records /dev/kmsg holds now, oldest first, without waiting for new ones. A regular
// file given as path is read as a saved log (one record per line), for tests and replays.
KernelLogRead read_kmsg(const std::string& path = "/dev/kmsg");
KernelLogRead read_kmsg(const std::string& path, const XidSink& sink);

// Splits a stream into lines across reads (and a follower's calls), cutting a line longer
// than 64 KiB (a binary file without newlines must not fill memory) but counting it as one.
class LineSplitter {
 public:
  void feed(std::string_view chunk, KernelLogRead& out);
  void finish(KernelLogRead& out);  // the last line, without a newline (a complete file)
  void reset() { partial_.clear(); }

 private:
  std::string partial_;
};

// The lines of `text` as read_kernel_log_file reads a file's; for logs already in memory.
KernelLogRead scan_kernel_log_text(std::string_view text, std::string source);

// A kernel log read as it grows (the exporter's Xid counters): each read_new() returns what
// was logged since the previous call, everything the log holds on the first. /dev/kmsg stays
// open between calls. A saved file is opened again each time and read from where the last
// call stopped (a line being written is completed by the next call), and from its start when
// it was replaced or truncated (log rotation): at most history_bytes a call until it has been
// read to its end (kUnlimitedKernelLogBytes: the whole file, within kKernelLogReadSeconds),
// kMaxKernelLogGrowthBytes a call after; what a call leaves is read by the next. Line numbers
// are the file's own (kmsg: records since the first read). Events go to `sink` when one is
// given, else to the result's events.
class KernelLogFollower {
 public:
  enum class Kind { Kmsg, SavedFile };
  KernelLogFollower(Kind kind, std::string path, std::uint64_t history_bytes = kMaxKernelLogHistoryBytes);

  KernelLogRead read_new(const XidSink& sink = {});
  const std::string& path() const { return path_; }

 private:
  friend KernelLogRead read_kernel_log_file(const std::string& path, const XidSink& sink);
  KernelLogRead read_new_kmsg(const XidSink* sink);
  // A saved file from where the last call stopped; to_the_end takes a last line without a
  // newline too (a file known to be complete).
  KernelLogRead read_file(bool to_the_end, const XidSink* sink);

  Kind kind_;
  std::string path_;
  std::uint64_t history_bytes_;
  procfs::unique_fd kmsg_;
  bool kmsg_is_file_ = false;  // a regular file given as the kmsg path (tests): read as saved
  bool file_seen_ = false;
  bool whole_read_ = false;  // the file (since it was new) has been read to its end once
  std::uint64_t device_ = 0, inode_ = 0;
  std::uint64_t offset_ = 0;  // bytes read; the line they end in is in splitter_
  std::size_t lines_ = 0;
  LineSplitter splitter_;
};

}  // namespace gpureap
