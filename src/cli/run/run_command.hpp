// `gpureap run [options] -- COMMAND ARGS...`: the job guard (job/job_guard.hpp).
#pragma once

#include <string>
#include <vector>

#include "cli/common/cli11_declarations.hpp"

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

// Where `gpureap run`'s own options end in its arguments (the words after "run"): at the first
// word that is neither one of run's options nor an option's value, or at "--". As timeout(1), env
// and tini do, everything from there on is the job's command, however much of it looks like
// gpureap's options (`gpureap run prog --report x -h` passes `--report x -h` to prog).
struct RunArgumentSplit {
  std::size_t options_end = 0;    // run's options are words [0, options_end)
  std::size_t command_begin = 0;  // the command is words [command_begin, end): after a "--"
};
RunArgumentSplit split_run_arguments(const CLI::App& run, const std::vector<std::string>& words);
int run_run(RunOptions options);

}  // namespace gpureap
