// Helpers for the `gpureap watch` tests: a policy file written for the test, the daemon started
// in the background with its log (stderr) read line by line and parsed (<N>event=... key=value),
// and waits on log lines with a deadline instead of sleeps.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_leak_checks.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {

// Policy lines for tests: looks every 100 ms, all of /proc every 300 ms.
inline constexpr const char* kFast = "interval = \"100ms\"\nfull_scan_interval = \"300ms\"\n";

struct WatchLine {
  int priority = -1;  // the <N> prefix; -1 when the line has none
  std::string event;
  std::map<std::string, std::string> fields;  // values unquoted (\" and \\ undone)
  std::string raw;
  std::chrono::steady_clock::time_point seen_at;

  std::string field(const std::string& key) const {
    const auto it = fields.find(key);
    return it == fields.end() ? std::string() : it->second;
  }
};

inline WatchLine parse_watch_line(const std::string& raw) {
  WatchLine line;
  line.raw = raw;
  std::size_t i = 0;
  if (raw.size() > 2 && raw[0] == '<' && raw[2] == '>') {
    line.priority = raw[1] - '0';
    i = 3;
  }
  while (i < raw.size()) {
    const auto eq = raw.find('=', i);
    if (eq == std::string::npos) break;
    const std::string key = raw.substr(i, eq - i);
    std::string value;
    std::size_t j = eq + 1;
    if (j < raw.size() && raw[j] == '"') {
      for (++j; j < raw.size() && raw[j] != '"'; ++j) {
        if (raw[j] == '\\' && j + 1 < raw.size() && (raw[j + 1] == '"' || raw[j + 1] == '\\')) ++j;
        value += raw[j];
      }
      ++j;
    } else {
      const auto end = raw.find(' ', j);
      value = raw.substr(j, end == std::string::npos ? std::string::npos : end - j);
      j = end == std::string::npos ? raw.size() : end;
    }
    line.fields[key] = value;
    i = j < raw.size() && raw[j] == ' ' ? j + 1 : j;
  }
  line.event = line.field("event");
  return line;
}

// Writes `text` to <config>/<name> (root's directory: a policy there is trusted) and returns the path.
inline std::string write_file(const SimHost& host, const std::string& name, const std::string& text) {
  const std::string path = host.config_dir() + "/" + name;
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

// gpureap watch --policy PATH <args>, in a session of its own, stderr on a pipe.
class BackgroundWatch {
 public:
  BackgroundWatch(const SimHost& host, const std::string& policy, const std::vector<std::string>& args = {},
                  const std::map<std::string, std::string>& extra_env = {}) {
    std::vector<std::string> argv = {gpureap_binary(), "watch", "--policy", policy};
    argv.insert(argv.end(), args.begin(), args.end());
    int err[2];
    if (pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    SpawnOptions options;
    options.env = host.env();
    options.env["ASAN_OPTIONS"] = asan_options_with_leak_check();  // a daemon: its leaks grow
    for (const auto& [k, v] : extra_env) options.env[k] = v;
    options.new_process_group = false;  // setsid below
    const PreparedExec exec(argv, options);
    pid_ = fork();
    if (pid_ == 0) {
      setsid();
      dup2(err[1], STDERR_FILENO);
      const int null = open("/dev/null", O_RDWR);
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      exec.exec_in_child(false);
    }
    close(err[1]);
    err_ = err[0];
  }
  BackgroundWatch(const BackgroundWatch&) = delete;
  BackgroundWatch& operator=(const BackgroundWatch&) = delete;
  ~BackgroundWatch() {
    if (!reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(err_);
  }

  pid_t pid() const { return pid_; }
  const std::vector<WatchLine>& lines() const { return lines_; }

  // The first line (already read or still to come) of `event` whose fields hold every one of
  // `fields`; a failure of the test after the timeout.
  std::optional<WatchLine> wait_for(const std::string& event, const std::map<std::string, std::string>& fields = {},
                                    int timeout_ms = 10000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (std::size_t next = 0;;) {
      for (; next < lines_.size(); ++next) {
        if (matches(lines_[next], event, fields)) return lines_[next];
      }
      if (!read_more(deadline)) {
        std::string all;
        for (const auto& l : lines_) all += l.raw + "\n";
        ADD_FAILURE() << "no line event=" << event << " with the fields asked for; the log was:\n" << all;
        return std::nullopt;
      }
    }
  }

  // The first line whose raw text contains `needle` (lines without key=value: "serving ...").
  std::optional<WatchLine> wait_for_text(const std::string& needle, int timeout_ms = 10000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (std::size_t next = 0;;) {
      for (; next < lines_.size(); ++next) {
        if (lines_[next].raw.find(needle) != std::string::npos) return lines_[next];
      }
      if (!read_more(deadline)) {
        ADD_FAILURE() << "no line with \"" << needle << "\" within " << timeout_ms << " ms";
        return std::nullopt;
      }
    }
  }

  // Until `n` lines of `event` with these fields have been read; false (a failure) after the timeout.
  bool wait_for_count(const std::string& event, const std::map<std::string, std::string>& fields, std::size_t n,
                      int timeout_ms = 10000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (count(event, fields) < n) {
      if (!read_more(deadline)) {
        ADD_FAILURE() << "fewer than " << n << " lines event=" << event << " within " << timeout_ms << " ms";
        return false;
      }
    }
    return true;
  }

  // How many lines of `event` with these fields were read so far.
  std::size_t count(const std::string& event, const std::map<std::string, std::string>& fields = {}) const {
    std::size_t n = 0;
    for (const auto& l : lines_) n += matches(l, event, fields) ? 1 : 0;
    return n;
  }

  void signal(int sig) const { ::kill(pid_, sig); }

  // SIGTERM (or `sig`), then its exit status (-1 when it did not exit, or died of a signal).
  int stop(int sig = SIGTERM, int timeout_ms = 15000) {
    ::kill(pid_, sig);
    return wait(timeout_ms);
  }

  int wait(int timeout_ms = 15000) {
    int status = 0;
    if (!eventually([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout_ms)) {
      ADD_FAILURE() << "gpureap watch did not exit within " << timeout_ms << " ms";
      return -1;
    }
    reaped_ = true;
    drain();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  static bool matches(const WatchLine& l, const std::string& event, const std::map<std::string, std::string>& fields) {
    if (l.event != event) return false;
    for (const auto& [k, v] : fields) {
      if (l.field(k) != v) return false;
    }
    return true;
  }

  void take_lines() {
    for (auto nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n')) {
      WatchLine line = parse_watch_line(buffer_.substr(0, nl));
      line.seen_at = std::chrono::steady_clock::now();
      lines_.push_back(std::move(line));
      buffer_.erase(0, nl + 1);
    }
  }

  // Reads what the daemon wrote, waiting until the deadline; false when nothing more can come.
  bool read_more(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{err_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::chrono::steady_clock::now() < deadline;
    char chunk[8192];
    const ssize_t n = read(err_, chunk, sizeof chunk);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    take_lines();
    return true;
  }

  void drain() {
    const int flags = fcntl(err_, F_GETFL);
    fcntl(err_, F_SETFL, flags | O_NONBLOCK);
    char chunk[8192];
    for (ssize_t n; (n = read(err_, chunk, sizeof chunk)) > 0;) buffer_.append(chunk, static_cast<std::size_t>(n));
    take_lines();
  }

  pid_t pid_ = -1;
  int err_ = -1;
  bool reaped_ = false;
  std::string buffer_;
  std::vector<WatchLine> lines_;
};

// Anything about `pid` in the audit log.
inline bool audited_any(const std::vector<nlohmann::json>& lines, pid_t pid) {
  for (const auto& l : lines) {
    if (l.value("pid", 0) == pid) return true;
  }
  return false;
}

}  // namespace gpureap::test
