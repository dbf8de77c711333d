// The audit log: one JSON line per signal sent (time, target identity, signal, reason, who
// asked, result), appended to a 0600 file and flushed to disk (fdatasync) before the signals
// it announces go out: once per step of the ladder (append the step's lines, then sync), not
// once per signal, so that a slow disk does not stretch the time a tree stays stopped. A log
// that cannot be written stops gpureap before it signals anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <sys/types.h>

#include "proc/proc_io.hpp"

namespace gpureap {

// Who asked: the user running gpureap, its parent and terminal, and the sudo user if any.
struct Requester {
  uid_t uid = 0;
  std::string user;
  pid_t ppid = 0;
  std::string tty;        // "" when not on a terminal
  std::string sudo_user;  // SUDO_USER, "" when not run through sudo

  static Requester current();
};

// Two lines per signal: "sending" is on disk before the signal goes out (so a crash between
// the two still leaves a record), "sent" follows with the result.
enum class AuditStage { Sending, Sent };

struct AuditRecord {
  AuditStage stage = AuditStage::Sent;
  pid_t pid = 0;
  std::uint64_t start_time_ticks = 0;
  int signal = 0;
  std::string reason;
  int result_errno = 0;  // 0: delivered (for Sent)
};

// Removing an object (doctor --fix: a shared memory file, a System V segment or semaphore set)
// is audited like a signal: a "removing" line on disk before, a "removed" line with the result.
struct AuditRemovalRecord {
  AuditStage stage = AuditStage::Sent;  // Sending: "removing"; Sent: "removed"
  std::string object;  // what, e.g. "/dev/shm/torch_123_4_0" or "System V segment 5"
  std::string reason;
  std::string result;  // Sent only: "removed", "in-use", ... and a message
};

class AuditLog {
 public:
  AuditLog() = default;

  // Opens (creates with mode 0600) for appending. On failure: nullopt and the reason in `error`.
  static std::optional<AuditLog> open(const std::string& path, Requester requester, std::string& error);
  // "" when open() would succeed, else the error it would give; creates nothing.
  static std::string problem(const std::string& path);

  // Appends one line and fdatasyncs it. Throws std::runtime_error when it cannot.
  void write(const AuditRecord& record) const;
  // Appends one removal line (doctor --fix: ipcrm, unlink) and fdatasyncs it.
  void write(const AuditRemovalRecord& record) const;
  // Appends one line without syncing: a step's lines, followed by one sync().
  void append(const AuditRecord& record) const;
  // fdatasync: every line appended so far is on disk. Throws std::runtime_error when it cannot.
  void sync() const;
  const std::string& path() const { return path_; }

 private:
  void append_line(const std::string& line) const;

  procfs::unique_fd fd_;
  std::string path_;
  Requester requester_;
};

// The line itself (without the newline), for tests.
std::string audit_line(const AuditRecord& record, const Requester& requester, double unix_time);
std::string audit_removal_line(const AuditRemovalRecord& record, const Requester& requester, double unix_time);

}  // namespace gpureap
