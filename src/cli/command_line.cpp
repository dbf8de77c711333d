// The command line: the nine commands in one table that builds the parser, the help and the
// dispatch. main.cpp only calls it; here CLI11 is compiled in cli's one unity batch instead of
// a translation unit of its own (a third of a release build's CLI11 work).
#include "cli/command_line.hpp"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/common/exit_codes.hpp"
#include "cli/doctor/doctor_command.hpp"
#include "cli/export/export_command.hpp"
#include "cli/fleet/fleet_command.hpp"
#include "cli/kill/kill_command.hpp"
#include "cli/ps/ps_command.hpp"
#include "cli/reap/reap_command.hpp"
#include "cli/run/run_command.hpp"
#include "cli/top/top_command.hpp"
#include "cli/watch/watch_command.hpp"
#include "text/sanitize.hpp"

namespace {

using CommandWords = std::vector<std::string>;

// One row of the command table: how a command joins the parser (its options, its help) and
// how it runs once parsed. The options live as long as the row.
struct Command {
  std::string_view name;
  std::function<CLI::App*(CLI::App&)> add;
  std::function<int()> run;
  // The status of a bad option or an internal error where the command's own statuses give 1
  // and 2 another meaning (doctor's findings, run's job status); kUsage/kInternalError otherwise.
  std::optional<int> failure_status;
  // The words after the command's name that CLI11 parses (run: those before the job's command).
  std::function<std::size_t(const CLI::App&, const CommandWords&)> parsed_words;
  CLI::App* app = nullptr;
};

// A row for a command whose options are an Options: add(parser, options), run(options), and for
// run, split(options, parser, words) -> the words CLI11 parses.
template <typename Options, typename Add, typename Run, typename Split = std::nullptr_t>
Command make_command(std::string_view name, Add add, Run run, std::optional<int> failure_status = std::nullopt,
                     [[maybe_unused]] Split split = nullptr) {
  auto options = std::make_shared<Options>();
  Command row;
  row.name = name;
  row.add = [options, add](CLI::App& parser) { return add(parser, *options); };
  row.run = [options, run] { return run(*options); };
  row.failure_status = failure_status;
  if constexpr (!std::is_same_v<Split, std::nullptr_t>) {
    row.parsed_words = [options, split](const CLI::App& parser, const CommandWords& words) {
      return split(*options, parser, words);
    };
  }
  return row;
}

// run's options end at the first word of the job's command: CLI11 sees only what is before.
std::size_t split_run_words(gpureap::RunOptions& options, const CLI::App& run, const CommandWords& words) {
  const auto split = gpureap::split_run_arguments(run, words);
  options.command.assign(words.begin() + static_cast<std::ptrdiff_t>(split.command_begin), words.end());
  return split.options_end;
}

// The nine commands, in the order of the help. The first runs when no command is named.
std::vector<Command> command_table() {
  using namespace gpureap;
  std::vector<Command> table;
  table.push_back(make_command<PsOptions>("ps", add_ps_command, run_ps));
  table.push_back(make_command<KillOptions>("kill", add_kill_command, run_kill));
  table.push_back(make_command<DoctorCommandOptions>("doctor", add_doctor_command, run_doctor,
                                                exit_code::kDoctorCouldNotRun));
  table.push_back(make_command<RunOptions>("run", add_run_command, run_run, exit_code::kRunCannotRun, split_run_words));
  table.push_back(make_command<ReapOptions>("reap", add_reap_command, run_reap));
  table.push_back(make_command<WatchOptions>("watch", add_watch_command, run_watch));
  table.push_back(make_command<ExportOptions>("export", add_export_command, run_export));
  table.push_back(make_command<FleetOptions>("fleet", add_fleet_command, run_fleet));
  table.push_back(make_command<TopOptions>("top", add_top_command, run_top));
  return table;
}

// Only the command asked for is built (each costs its options' setup: run's job pays for it
// at its start); all of them when none is named: for the top-level help, and for `gpureap`
// alone, which runs the first (ps). Returns the named command, if any.
Command* build_parsers(CLI::App& app, std::vector<Command>& commands, std::string_view first) {
  Command* named = nullptr;
  for (Command& command : commands) {
    if (command.name == first) named = &command;
  }
  for (Command& command : commands) {
    if (named == nullptr || named == &command) command.app = command.add(app);
  }
  return named;
}

// kill(1)'s `kill -9 PID`: the signal as the first word reads as --signal (`signal_option`
// holds the word `arguments` then points to). False, with a hint said, for a signal where
// CLI11 would misread it.
bool follow_kill_habits(int argc, char** argv, std::vector<char*>& arguments, std::string& signal_option) {
  if (auto option = gpureap::signal_habit_as_option(argv[2])) {
    signal_option = std::move(*option);
    arguments[2] = signal_option.data();
  }
  if (const std::string hint = gpureap::misplaced_signal_hint(CommandWords(argv + 2, argv + argc)); !hint.empty()) {
    std::cerr << hint << "\n";
    return false;
  }
  return true;
}

// `--user=` with nothing after '=': CLI11 would take the next word as its value (`kill
// --user="$UNSET" 4242` would select uid 4242's processes). Refused, as `--user ""` is: true
// when said.
bool refused_empty_value(std::string_view first, int parsed_argc, char** argv) {
  for (int i = 2; i < parsed_argc; ++i) {
    const std::string_view word = argv[i];
    if (word == "--") break;
    if (word.size() > 3 && word.substr(0, 2) == "--" && word.back() == '=' && word.find('=') == word.size() - 1) {
      std::cerr << "gpureap " << first << ": " << gpureap::sanitize_for_terminal(word)
                << " has an empty value (give one, or leave the option out)\n";
      return true;
    }
  }
  return false;
}

// The command CLI11 parsed options of, if any: its failure status is used.
int failure_status(const std::vector<Command>& commands, int otherwise) {
  for (const Command& command : commands) {
    if (command.app != nullptr && command.app->parsed() && command.failure_status) return *command.failure_status;
  }
  return otherwise;
}

// --help and --version: CLI11 prints them. An error is ours to print: its text repeats the
// argument as typed, which may hold escape sequences, so it goes through the sanitiser, on
// one line.
int parse_failed(CLI::App& app, const CLI::ParseError& error, const std::vector<Command>& commands) {
  if (error.get_exit_code() == 0) {
    app.exit(error);
    return gpureap::exit_code::kOk;
  }
  std::string command = "gpureap";
  for (CLI::App* sub : app.get_subcommands()) command += " " + sub->get_name();
  std::cerr << command << ": " << gpureap::sanitize_for_terminal(error.what()) << " (see " << command << " --help)\n";
  return failure_status(commands, gpureap::exit_code::kUsage);
}

// Runs the parsed command, or the first when none was named.
int run_parsed(const CLI::App& app, std::vector<Command>& commands) {
  try {
    for (Command& command : commands) {
      if (command.app != nullptr && app.got_subcommand(command.app)) return command.run();
    }
    if (app.get_subcommands().empty()) return commands.front().run();
  } catch (const std::exception& error) {
    std::cerr << "gpureap: internal error: " << gpureap::sanitize_for_terminal(error.what()) << "\n";
    return failure_status(commands, gpureap::exit_code::kInternalError);
  }
  return gpureap::exit_code::kOk;
}

}  // namespace

int gpureap::run_command_line(int argc, char** argv) {
  // Answered before the parser is built: setting up every command's options costs more than
  // printing the version (scripts and package checks call it in loops).
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::fputs("gpureap " GPUREAP_VERSION "\n", stdout);
    return gpureap::exit_code::kOk;
  }
  CLI::App app{"gpureap: who holds GPU memory, and how to get it back"};
  app.set_version_flag("--version", std::string("gpureap ") + GPUREAP_VERSION);
  app.require_subcommand(0, 1);
  std::vector<Command> commands = command_table();
  const std::string_view first = argc > 1 ? argv[1] : "";
  Command* named = build_parsers(app, commands, first);
  std::vector<char*> arguments(argv, argv + argc);
  std::string signal_option;
  if (first == "kill" && argc > 2 && !follow_kill_habits(argc, argv, arguments, signal_option)) {
    return gpureap::exit_code::kUsage;
  }
  argv = arguments.data();
  int parsed_argc = argc;
  if (named != nullptr && named->parsed_words) {
    const CommandWords words(argv + 2, argv + argc);
    parsed_argc = 2 + static_cast<int>(named->parsed_words(*named->app, words));
  }
  if (refused_empty_value(first, parsed_argc, argv)) {
    return named != nullptr && named->failure_status ? *named->failure_status : gpureap::exit_code::kUsage;
  }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& error) {
    return parse_failed(app, error, commands);
  }
  return run_parsed(app, commands);
}
