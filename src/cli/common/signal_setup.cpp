#include "cli/common/signal_setup.hpp"

#include <iostream>

#include "text/sanitize.hpp"

namespace gpureap {

std::optional<SignalSetup> open_signal_setup(std::string_view command, const std::string& audit_log_option,
                                             bool dry_run) {
  std::string error;
  auto config = load_kill_config(error);
  if (!config) {
    std::cerr << command << ": " << sanitize_for_terminal(error) << "\n";
    return std::nullopt;
  }
  SignalSetup setup;
  setup.config = std::move(*config);
  const std::string path = audit_log_path(audit_log_option, setup.config);
  if (!path.empty() && !dry_run) {
    setup.audit = AuditLog::open(path, Requester::current(), error);
    if (!setup.audit) {
      std::cerr << command << ": " << sanitize_for_terminal(error) << "; nothing was signalled\n";
      return std::nullopt;
    }
  }
  return setup;
}

}  // namespace gpureap
