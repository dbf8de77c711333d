// Running a helper program to its end or its timeout: the MPS front end, run's debugger dumps
// (py-spy, gdb), watch's notification command and doctor's `nvidia-smi -r`. One way for all,
// because each runs as root on a shared machine (process_start.hpp does the starting):
// - an argument vector, never a shell; the program is the descriptor the caller opened, or an
//   absolute path, or a name found in an absolute PATH entry, opened once and checked on its
//   descriptor (program_file.hpp), then exec'd by that descriptor, never by a path again;
// - a clean slate: only descriptors 0, 1 and 2, no signal blocked or ignored, gpureap's own
//   resource limits undone (spawn_hygiene.hpp), working directory "/", and a minimal
//   environment (kHelperEnvironment plus extra_env), so nothing of gpureap's caller leaks in;
// - with the credentials of the process it acts for when run_as says so, and then no way back
//   up (PR_SET_NO_NEW_PRIVS);
// - under a keeper (descendant_sweep.hpp): at its timeout its process group is killed, and
//   whether it ends or times out, everything it started ends too, setsid'd daemons included;
// - what it writes is kept up to a bound.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "spawn/process_start.hpp"
#include "spawn/program_file.hpp"

namespace gpureap {

// The environment every helper starts with: the standard PATH (what it runs itself is found
// where root's programs are) and the C locale (replies gpureap reads, such as the MPS front
// end's "Server 123 not found", are not translated). HOME, TERM and the rest are not set.
inline constexpr const char* kHelperEnvironment[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LC_ALL=C",
};

struct TimedCommand {
  std::vector<std::string> argv;  // argv[0] as find_executable takes it, or the name shown with program_fd
  // When >= 0, exec this open file (O_PATH or O_RDONLY) and look nothing up: argv[0] is only
  // the name the program is given. The caller keeps the descriptor.
  int program_fd = -1;
  // Run with these credentials (setgroups, setgid, setuid, each checked; then no new
  // privileges): a failure is NotStarted.
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
  // "NAME=value" entries added to (or replacing those of) kHelperEnvironment.
  std::vector<std::string> extra_env;
};

enum class TimedOutcome { NotStarted, Exited, Signalled, TimedOut };

struct TimedRun {
  TimedOutcome outcome = TimedOutcome::NotStarted;
  std::string error;   // NotStarted: why ("/usr/bin/gdb: Permission denied", "gdb is not installed")
  std::string program; // the file that was run
  int exit_status = 0; // Exited
  int signal = 0;      // Signalled
  std::string output;  // what it wrote, up to max_output_bytes
  // Only where the kernel cannot list a process's children (no CONFIG_PROC_CHILDREN): what the
  // program started outside its process group may still run.
  bool descendants_may_remain = false;
  bool ok() const { return outcome == TimedOutcome::Exited && exit_status == 0; }
};

TimedRun run_timed_command(const TimedCommand& command);

// "exit status 3", "killed by signal 9", "did not finish within 0.3 s and was killed (with
// everything it started)", or the error it could not start with.
std::string describe_timed_run(const TimedRun& run, std::chrono::milliseconds timeout);

}  // namespace gpureap
