#include "watch/event_log.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "text/sanitize.hpp"
#include "text/truncate.hpp"

namespace gpureap {

std::string log_field(std::string_view key, std::string_view value) {
  // The sanitiser escapes backslashes and controls, so a quote escaped as \" stays unambiguous.
  // A command line may run to megabytes: cut, so that an event stays one line for journald.
  const std::string clean = truncate_to_width(sanitize_for_terminal(value.substr(0, 4 * kMaxLogValueColumns)),
                                              kMaxLogValueColumns);
  const bool quote = clean.empty() || std::any_of(clean.begin(), clean.end(), [](char c) {
                       return c == ' ' || c == '"' || c == '=';
                     });
  std::string out(key);
  out += '=';
  if (!quote) return out + clean;
  out += '"';
  for (char c : clean) {
    if (c == '"') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

std::string log_line(LogPriority priority, std::string_view event, std::initializer_list<LogField> fields) {
  std::string line = "<" + std::to_string(static_cast<int>(priority)) + ">" + log_field("event", event);
  for (const auto& [key, value] : fields) {
    line += ' ';
    line += log_field(key, value);
  }
  return line;
}

void EventLog::write(LogPriority priority, std::string_view event, std::initializer_list<LogField> fields) const {
  const std::string line = log_line(priority, event, fields) + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed log must not stop the daemon
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace gpureap
