// gpureap: find, explain and end whatever holds GPU memory.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "cli/doctor_command.hpp"
#include "cli/exit_codes.hpp"
#include "cli/export_command.hpp"
#include "cli/fleet_command.hpp"
#include "cli/kill_command.hpp"
#include "cli/ps_command.hpp"
#include "cli/run_command.hpp"
#include "cli/reap_command.hpp"
#include "cli/top_command.hpp"
#include "cli/watch_command.hpp"
#include "text/sanitize.hpp"

int main(int argc, char** argv) {
  // Answered before the parser is built: setting up every command's options costs more than
  // printing the version (scripts and package checks call it in loops).
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::fputs("gpureap " GPUREAP_VERSION "\n", stdout);
    return gpureap::exit_code::kOk;
  }
  CLI::App app{"gpureap: who holds GPU memory, and how to get it back"};
  app.set_version_flag("--version", std::string("gpureap ") + GPUREAP_VERSION);
  app.require_subcommand(0, 1);
  // Only the command asked for is built (each costs its options' setup: run's job pays for it
  // at its start); all of them for the top-level help and for `gpureap [ps options]`.
  const std::string_view first = argc > 1 ? argv[1] : "";
  const bool named = first == "ps" || first == "kill" || first == "doctor" || first == "run" || first == "reap" ||
                     first == "watch" || first == "export" || first == "fleet" || first == "top";
  auto wanted = [&](std::string_view name) { return !named || first == name; };
  gpureap::PsOptions ps_options;
  CLI::App* ps = wanted("ps") ? gpureap::add_ps_command(app, ps_options) : nullptr;
  gpureap::KillOptions kill_options;
  CLI::App* kill = wanted("kill") ? gpureap::add_kill_command(app, kill_options) : nullptr;
  gpureap::DoctorCommandOptions doctor_options;
  CLI::App* doctor = wanted("doctor") ? gpureap::add_doctor_command(app, doctor_options) : nullptr;
  gpureap::RunOptions run_options;
  CLI::App* run = wanted("run") ? gpureap::add_run_command(app, run_options) : nullptr;
  gpureap::ReapOptions reap_options;
  CLI::App* reap = wanted("reap") ? gpureap::add_reap_command(app, reap_options) : nullptr;
  gpureap::WatchOptions watch_options;
  CLI::App* watch = wanted("watch") ? gpureap::add_watch_command(app, watch_options) : nullptr;
  gpureap::ExportOptions export_options;
  CLI::App* exporter = wanted("export") ? gpureap::add_export_command(app, export_options) : nullptr;
  gpureap::FleetOptions fleet_options;
  CLI::App* fleet = wanted("fleet") ? gpureap::add_fleet_command(app, fleet_options) : nullptr;
  gpureap::TopOptions top_options;
  CLI::App* top = wanted("top") ? gpureap::add_top_command(app, top_options) : nullptr;
  auto got = [&app](CLI::App* command) { return command != nullptr && app.got_subcommand(command); };
  auto parsed = [](CLI::App* command) { return command != nullptr && command->parsed(); };
  // run's options end at the first word of the job's command: CLI11 sees only what is before.
  int parsed_argc = argc;
  if (first == "run") {
    const std::vector<std::string> words(argv + 2, argv + argc);
    const auto split = gpureap::split_run_arguments(*run, words);
    parsed_argc = 2 + static_cast<int>(split.options_end);
    run_options.command.assign(words.begin() + static_cast<std::ptrdiff_t>(split.command_begin), words.end());
  }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& error) {
    // --help and --version: CLI11 prints them. An error is ours to print: its text repeats the
    // argument as typed, which may hold escape sequences, so it goes through the sanitiser, on
    // one line.
    if (error.get_exit_code() == 0) {
      app.exit(error);
      return gpureap::exit_code::kOk;
    }
    std::string command = "gpureap";
    for (CLI::App* sub : app.get_subcommands()) command += " " + sub->get_name();
    std::cerr << command << ": " << gpureap::sanitize_for_terminal(error.what()) << " (see " << command
              << " --help)\n";
    // doctor's 1 and 2 mean warnings and critical findings: its usage errors need their own code.
    if (parsed(run)) return gpureap::exit_code::kRunCannotRun;  // 2 may be the job's own status
    return parsed(doctor) ? gpureap::exit_code::kDoctorCouldNotRun : gpureap::exit_code::kUsage;
  }
  try {
    if (got(doctor)) return gpureap::run_doctor(doctor_options);
    if (got(kill)) return gpureap::run_kill(kill_options);
    if (got(run)) return gpureap::run_run(run_options);
    if (got(reap)) return gpureap::run_reap(reap_options);
    if (got(watch)) return gpureap::run_watch(watch_options);
    if (got(exporter)) return gpureap::run_export(export_options);
    if (got(fleet)) return gpureap::run_fleet(fleet_options);
    if (got(top)) return gpureap::run_top(top_options);
    if (got(ps) || app.get_subcommands().empty()) return gpureap::run_ps(ps_options);
  } catch (const std::exception& error) {
    std::cerr << "gpureap: internal error: " << gpureap::sanitize_for_terminal(error.what()) << "\n";
    if (parsed(run)) return gpureap::exit_code::kRunCannotRun;
    return parsed(doctor) ? gpureap::exit_code::kDoctorCouldNotRun : gpureap::exit_code::kInternalError;
  }
  return gpureap::exit_code::kOk;
}
