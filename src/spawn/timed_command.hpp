// Running a helper program to its end or its timeout: watch's notification command, run's
// debugger dumps (py-spy, gdb) and doctor's `nvidia-smi -r`. One way for all three, because
// each runs as root on a shared machine:
// - an argument vector, never a shell; the program is an absolute path, or a name found in an
//   absolute PATH entry (a relative entry, "." or "", is never searched as root);
// - it inherits only descriptors 0, 1 and 2 (spawn_hygiene), an empty signal mask and the
//   default disposition of the signals its caller blocks or ignores;
// - it leads a process group of its own, and at its timeout the whole group is sent SIGKILL
//   (before the leader is reaped, so the group's ID cannot name anyone else yet): what it
//   started in the background ends with it;
// - what it writes is kept up to a bound, never waited for once it has exited (a background
//   child holding the pipe does not hold gpureap).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace gpureap {

// An executable regular file: `name` itself when it is an absolute path, else the first in an
// absolute PATH entry (the default PATH when unset). "" when there is none: a relative path
// ("./x", "bin/x") is never run.
std::string find_executable(const std::string& name);

// Who a program runs as, on behalf of a process whose claim it serves.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

struct TimedCommand {
  std::vector<std::string> argv;  // argv[0] as find_executable takes it
  int program_fd = -1;            // when >= 0: this open file is run, argv[0] only names it
  std::optional<Credentials> run_as;
  std::chrono::milliseconds timeout{30000};
  // Standard input: /dev/null, or this text (at most a pipe's buffer, 64 KiB) followed by EOF.
  bool give_input = false;
  std::string input;
  // Where stdout and stderr go. Capture: kept in TimedRun::output (stdout and stderr together,
  // or stderr alone with capture_stderr_only; stdout then goes to /dev/null). ToFile: both
  // into output_fd (a file the caller opened).
  enum class Output { Capture, ToFile } output = Output::Capture;
  bool capture_stderr_only = false;
  int output_fd = -1;
  std::size_t max_output_bytes = 64 * 1024;
  // "NAME=value" entries added to (or replacing those of) gpureap's own environment.
  std::vector<std::string> extra_env;
};

enum class TimedOutcome { NotStarted, Exited, Signalled, TimedOut };

struct TimedRun {
  TimedOutcome outcome = TimedOutcome::NotStarted;
  std::string error;   // NotStarted: why ("/usr/bin/gdb: Permission denied", "gdb is not installed")
  std::string program; // the path that was run
  int exit_status = 0; // Exited
  int signal = 0;      // Signalled
  std::string output;  // what it wrote, up to max_output_bytes
  bool ok() const { return outcome == TimedOutcome::Exited && exit_status == 0; }
};

TimedRun run_timed_command(const TimedCommand& command);

// "exit status 3", "killed by signal 9", "did not finish within 0.3 s and was killed (its
// process group too)", or the error it could not start with.
std::string describe_timed_run(const TimedRun& run, std::chrono::milliseconds timeout);

}  // namespace gpureap
