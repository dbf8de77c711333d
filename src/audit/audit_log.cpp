#include "audit/audit_log.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "accounts/user_names.hpp"
#include "text/signal_names.hpp"

namespace gpureap {
namespace {

std::string iso8601_utc(double unix_time) {
  const auto seconds = static_cast<std::time_t>(std::floor(unix_time));
  const auto millis = static_cast<int>((unix_time - static_cast<double>(seconds)) * 1000.0);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03}Z", buffer, std::min(millis, 999));
}

nlohmann::ordered_json requested_by(const Requester& requester) {
  nlohmann::ordered_json by{{"uid", requester.uid}, {"user", requester.user}, {"ppid", requester.ppid}};
  by["tty"] = requester.tty.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(requester.tty);
  if (!requester.sudo_user.empty()) by["sudo_user"] = requester.sudo_user;
  return by;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Requester Requester::current() {
  Requester r;
  r.uid = getuid();
  r.user = UserNames().name(r.uid);
  r.ppid = getppid();
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    char name[256];
    if (isatty(fd) == 1 && ttyname_r(fd, name, sizeof name) == 0) {
      r.tty = name;
      break;
    }
  }
  if (const char* sudo = std::getenv("SUDO_USER"); sudo != nullptr) r.sudo_user = sudo;
  return r;
}

std::string audit_removal_line(const AuditRemovalRecord& record, const Requester& requester, double unix_time) {
  nlohmann::ordered_json line{
      {"time", iso8601_utc(unix_time)},
      {"stage", record.stage == AuditStage::Sending ? "removing" : "removed"},
      {"object", record.object},
      {"reason", record.reason},
      {"requested_by", requested_by(requester)},
      {"result", record.stage == AuditStage::Sending ? std::string("pending") : record.result},
  };
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string audit_line(const AuditRecord& record, const Requester& requester, double unix_time) {
  const nlohmann::ordered_json by = requested_by(requester);
  nlohmann::ordered_json line{
      {"time", iso8601_utc(unix_time)},
      {"stage", record.stage == AuditStage::Sending ? "sending" : "sent"},
      {"pid", record.pid},
      {"start_time_ticks", record.start_time_ticks},
      {"signal", signal_name(record.signal)},
      {"reason", record.reason},
      {"requested_by", by},
      {"result", record.stage == AuditStage::Sending ? std::string("pending")
                 : record.result_errno == 0           ? std::string("delivered")
                                                      : fmt::format("failed: {}", std::strerror(record.result_errno))},
  };
  if (record.stage == AuditStage::Sent && record.result_errno != 0) line["errno"] = record.result_errno;
  return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

namespace {

std::string refusal_text(const std::string& path, const std::string& why) {
  return fmt::format("cannot use {} as the audit log: {}", path, why);
}

}  // namespace

std::string AuditLog::problem(const std::string& path) {
  const std::string why = procfs::output_file_problem(path);
  return why.empty() ? "" : refusal_text(path, why);
}

std::optional<AuditLog> AuditLog::open(const std::string& path, Requester requester, std::string& error) {
  std::string why;
  procfs::unique_fd owned = procfs::open_output_file(path, procfs::OutputMode::Append, why);
  if (!owned) {
    error = refusal_text(path, why);
    return std::nullopt;
  }
  AuditLog log;
  log.fd_ = std::move(owned);
  log.path_ = path;
  log.requester_ = std::move(requester);
  return log;
}

void AuditLog::write(const AuditRecord& record) const {
  append(record);
  sync();
}

void AuditLog::write(const AuditRemovalRecord& record) const {
  append_line(audit_removal_line(record, requester_, unix_now()) + "\n");
  sync();
}

void AuditLog::append(const AuditRecord& record) const {
  append_line(audit_line(record, requester_, unix_now()) + "\n");
}

void AuditLog::append_line(const std::string& line) const {
  // One write with O_APPEND: concurrent gpureap runs never interleave inside a line.
  if (const int error = procfs::write_all(fd_.get(), line); error != 0) {
    throw std::runtime_error(fmt::format("cannot write the audit log {}: {}", path_, std::strerror(error)));
  }
}

void AuditLog::sync() const {
  if (fdatasync(fd_.get()) != 0) {
    throw std::runtime_error(fmt::format("cannot flush the audit log {}: {}", path_, std::strerror(errno)));
  }
}

}  // namespace gpureap
