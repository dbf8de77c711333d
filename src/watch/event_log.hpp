// watch's log: one line per event on a descriptor (stderr, which journald reads), in the form
// sd-daemon(3) describes: a "<N>" syslog priority first, then `event=NAME` and key=value
// fields. Every value passes through the terminal sanitiser (command lines, user and container
// names are chosen by others) and is quoted when it holds a space, a quote or '=', so a line
// cannot be forged or split by what it reports.
#pragma once

#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace gpureap {

enum class LogPriority { Error = 3, Warning = 4, Notice = 5, Info = 6, Debug = 7 };

using LogField = std::pair<std::string_view, std::string>;

// Longer values are cut (ending in "…"): journald splits lines past 48 KiB (LineMax).
inline constexpr std::size_t kMaxLogValueColumns = 1024;

// `key=value`, the value sanitised, cut and quoted when needed ("" for an empty one).
std::string log_field(std::string_view key, std::string_view value);

// The whole line without its newline: "<5>event=notice rule=idle pid=42".
std::string log_line(LogPriority priority, std::string_view event, std::initializer_list<LogField> fields);

class EventLog {
 public:
  explicit EventLog(int fd) : fd_(fd) {}
  // One write(2) per line, so that lines of two threads never interleave.
  void write(LogPriority priority, std::string_view event, std::initializer_list<LogField> fields) const;

 private:
  int fd_;
};

}  // namespace gpureap
