// What a command that signals starts from: the [kill] configuration and, before anything is
// signalled, the audit log (if it cannot be written, nothing may be signalled).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "audit/audit_log.hpp"
#include "kill/kill_config.hpp"

namespace gpureap {

struct SignalSetup {
  KillConfig config;
  std::optional<AuditLog> audit;  // none without a path, or when nothing will be signalled
  const AuditLog* audit_log() const { return audit ? &*audit : nullptr; }
};

// The configuration, and the audit log that `audit_log_option`, $GPUREAP_AUDIT_LOG or the
// configuration names, opened unless `dry_run`. nullopt when either cannot be read or written,
// after saying so on stderr as `command` ("gpureap kill": a usage error, exit 2).
std::optional<SignalSetup> open_signal_setup(std::string_view command, const std::string& audit_log_option,
                                             bool dry_run);

}  // namespace gpureap
