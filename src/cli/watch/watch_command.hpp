// The `watch` subcommand: the policy daemon (src/watch), or with --check-config a check of a
// policy file that prints what its rules will do.
#pragma once

#include <optional>
#include <string>

#include "cli/common/cli11_declarations.hpp"

namespace gpureap {

struct WatchOptions {
  std::string policy = "/etc/gpureap/watch.toml";
  std::string check_config;  // --check-config FILE
  std::string interval;      // as typed; "" = the policy's
  bool dry_run = false;
  std::string audit_log;
  std::string empty_option;  // the first option given an empty value
  // --listen: serve /metrics in-process (as `export` does); without it no HTTP is loaded.
  std::optional<std::string> listen;
  std::optional<std::string> web_config;
  bool per_process = false;
  std::string max_scrapes = "10";
  std::string kernel_log;  // --kernel-log FILE: Xid events from it instead of /dev/kmsg
  bool no_kernel_log = false;
  std::string stop_timeout;  // as typed; "" = not checked
};

CLI::App* add_watch_command(CLI::App& app, WatchOptions& options);

int run_watch(WatchOptions options);

}  // namespace gpureap
