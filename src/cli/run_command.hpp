// `gpureap run [options] -- COMMAND ARGS...`: the job guard (job/job_guard.hpp).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace gpureap {

struct RunOptions {
  std::vector<std::string> command;
  std::string kill_timeout = "10";
  std::string verify_timeout = "30";
  std::string hang_timeout;
  std::string poll_interval = "500ms";
  bool fail_fast = false;
  bool dump_on_hang = false;
  std::string evidence_dir;
  bool json = false;
  std::string report_file;
  bool no_cgroup = false;
  std::string audit_log;
  std::string empty_option;  // the first option given an empty value
};

CLI::App* add_run_command(CLI::App& app, RunOptions& options);
int run_run(RunOptions options);

}  // namespace gpureap
