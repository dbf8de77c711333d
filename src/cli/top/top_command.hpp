// The `top` subcommand: a live view of every GPU and what holds it, refreshed every
// --interval with the driver kept initialised, from which processes can be ended through the
// kill engine (plan shown first, memory verified free after); --once prints one frame.
#pragma once

#include <optional>
#include <string>

#include "cli/common/cli11_declarations.hpp"

namespace gpureap {

struct TopOptions {
  std::string interval = "1";  // as typed: checked by the duration parser
  double interval_s = 1;
  bool once = false;
  bool readonly = false;
  bool tree = false;
  std::string sort = "memory";
  std::optional<unsigned> gpu;
  std::string audit_log;
  std::string color = "auto";
};

CLI::App* add_top_command(CLI::App& app, TopOptions& options);

int run_top(TopOptions options);

}  // namespace gpureap
