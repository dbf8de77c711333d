// The `reap` subcommand: job-end cleanup for Slurm epilogs, Kubernetes and cron. Ends what a
// job provably owns (its cgroup, or its user's GPU processes), then verifies that each GPU it
// used is back to its baseline, and exits non-zero naming whatever remains.
#pragma once

#include <string>
#include <vector>

#include "cli/common/cli11_declarations.hpp"

namespace gpureap {

struct ReapOptions {
  std::string cgroup;
  std::vector<std::string> users;  // --user NAME|UID
  std::vector<std::string> uids;   // --uid N
  std::string gpus;                // as typed: "0,2-3", "GPU-…"
  std::vector<std::string> except;
  std::string baseline_mib;        // as typed; "" = the default baseline
  double baseline_mib_value = -1;
  std::string kill_timeout = "10";
  double kill_timeout_s = 10;
  std::string verify_timeout = "30";
  double verify_timeout_s = 30;
  bool dry_run = false;
  bool json = false;
  std::string audit_log;
  std::string color = "auto";
  bool wide = false;
  std::string empty_option;  // the first option given an empty value
};

CLI::App* add_reap_command(CLI::App& app, ReapOptions& options);

int run_reap(ReapOptions options);

}  // namespace gpureap
