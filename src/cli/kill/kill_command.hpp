// The `kill` subcommand: select from one snapshot, pin, show the plan, confirm, run the
// escalation ladder, verify the memory was released, report (text or JSON), exit status.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/common/cli11_declarations.hpp"

#include "kill/target_selection.hpp"

namespace gpureap {

struct KillOptions {
  SelectionCriteria criteria;
  std::vector<std::string> gpus;  // --gpu as typed: resolved into criteria's GPUs (gpu_choice.hpp)
  bool no_tree = false;
  std::string empty_option;  // the first selection option given an empty value (refused)
  std::string signal = "TERM";
  std::string timeout = "10";  // as typed; the duration parser sets timeout_s
  double timeout_s = 10;
  bool no_escalate = false;
  bool dry_run = false;
  bool yes = false;
  bool json = false;
  std::string verify_timeout = "30";
  double verify_timeout_s = 30;
  bool no_verify = false;
  bool reap_zombies = false;
  bool force = false;
  std::vector<std::string> protect;
  std::string audit_log;  // "" = $GPUREAP_AUDIT_LOG, else none
  std::string color = "auto";
  bool wide = false;  // never cut commands, even on a terminal
};

CLI::App* add_kill_command(CLI::App& app, KillOptions& options);

// kill(1)'s habit, `kill -9 PID`, `kill -KILL PID`, `kill -SIGKILL PID`: the first word after
// `kill`, when it is a signal and not one of kill's own short flags, as "--signal=9".
std::optional<std::string> signal_habit_as_option(std::string_view word);
// The same habit anywhere after the first word (`gpureap kill 123 -9`): the error that says
// where the signal goes, or "" when `words` (those after `kill`) hold none.
std::string misplaced_signal_hint(const std::vector<std::string>& words);

int run_kill(KillOptions options);

}  // namespace gpureap
