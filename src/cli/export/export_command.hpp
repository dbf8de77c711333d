// The `export` subcommand: a Prometheus endpoint for this host's GPUs (docs/metrics.md), or
// with --once one collection printed to stdout.
#pragma once

#include <optional>
#include <string>

#include "cli/common/cli11_declarations.hpp"

namespace gpureap {

struct ExportOptions {
  std::optional<std::string> listen;      // as typed; checked by parse_listen_address
  std::optional<std::string> web_config;
  bool per_process = false;
  std::string max_scrapes = "10";
  std::string cache = "1s";
  std::string reconcile = "5m";  // walks of /proc that check the event-kept holders
  std::optional<std::string> kernel_log;
  bool no_kernel_log = false;
  bool once = false;
};

CLI::App* add_export_command(CLI::App& app, ExportOptions& options);
int run_export(const ExportOptions& options);

}  // namespace gpureap
