// The `fleet` subcommand: the cluster's GPUs as a Prometheus server that scrapes gpureap's
// exporters sees them (docs/fleet.md), read through its HTTP API.
#pragma once

#include <string>
#include <vector>

#include "cli/common/cli11_declarations.hpp"

namespace gpureap {

struct FleetOptions {
  std::string prometheus;
  std::string user;
  std::string password_file;
  std::string ca_file;
  bool insecure = false;
  std::string timeout = "10";
  double timeout_s = 10;
  std::string host_pattern;       // --host: RE2, searched in the instance label
  std::vector<std::string> gpus;  // --gpu: indices or UUID prefixes
  int top = 3;
  bool json = false;
  bool wide = false;
  std::string color = "auto";
  std::string empty_option;
};

CLI::App* add_fleet_command(CLI::App& app, FleetOptions& options);

int run_fleet(FleetOptions options);

}  // namespace gpureap
