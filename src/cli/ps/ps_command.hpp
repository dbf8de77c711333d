// The `ps` subcommand: options, one-shot or --watch loop, exit status.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/common/cli11_declarations.hpp"

#include "cli/ps/ps_filter.hpp"
#include "text/terminal_style.hpp"

namespace gpureap {

struct PsOptions {
  bool json = false;
  bool tree = false;
  std::optional<std::string> watch;  // --watch as typed: checked by the duration parser
  double watch_seconds = 0;  // 0: once
  bool wide = false;         // never cut commands, even on a terminal
  std::string color = "auto";
  std::vector<std::string> gpus;  // --gpu as typed: resolved into filter.gpus for each snapshot
  PsFilter filter;
};

// Adds `ps` to the app; options are written into `options`.
CLI::App* add_ps_command(CLI::App& app, PsOptions& options);

int run_ps(PsOptions options);

}  // namespace gpureap
