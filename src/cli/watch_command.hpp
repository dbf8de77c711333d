// The `watch` subcommand: the policy daemon (src/watch), or with --check-config a check of a
// policy file that prints what its rules will do.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace gpureap {

struct WatchOptions {
  std::string policy = "/etc/gpureap/watch.toml";
  std::string check_config;  // --check-config FILE
  std::string interval;      // as typed; "" = the policy's
  bool dry_run = false;
  std::string audit_log;
  std::string empty_option;  // the first option given an empty value
};

CLI::App* add_watch_command(CLI::App& app, WatchOptions& options);

int run_watch(WatchOptions options);

}  // namespace gpureap
