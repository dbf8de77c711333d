// Writing results and asking the person at the terminal, shared by the commands.
#pragma once

#include <string>
#include <string_view>

#include "cli/common/cli11_declarations.hpp"

namespace gpureap {

// --color auto|always|never, the same on every command.
void add_color_option(CLI::App* command, std::string& color);

// One line on stderr, "<command>: <line>", sanitised and in one write (a daemon's threads log
// too): what export and watch say as they serve.
void say_on_stderr(std::string_view command, const std::string& line);

// Writes to stdout and flushes, so output and prompts on stderr appear in order: as it is
// (JSON, metrics).
void write_out(const std::string& text);

// The same for text a person reads: in the terminal's character set (text/charset.hpp).
void write_text(const std::string& text);

enum class Answer { Yes, No, NoTerminal };

// The one confirmation rule of kill and doctor --fix: the question goes to the controlling
// terminal (/dev/tty), so it is asked even when stdin or stdout is a pipe (`gpureap kill --all
// | tee log`). `shown_first` (the plan, when it has not reached the terminal otherwise) is
// written there before "<question> [y/N] ". Yes only for an explicit yes. NoTerminal, with
// nothing written, when the process has no terminal at all (cron, setsid, a Slurm epilog):
// the caller then proceeds only with --yes.
Answer ask_on_terminal(std::string_view shown_first, std::string_view question);

// True when stdout is a terminal (the plan printed there was seen).
bool stdout_is_terminal();

}  // namespace gpureap
