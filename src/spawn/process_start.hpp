// The one place gpureap starts a program: fork (or clone3 into a cgroup), then in the child
// only async-signal-safe calls (everything it needs, argv and envp included, is prepared
// before the fork), then exec. A failure in the child before exec comes back through a
// close-on-exec pipe, so "cannot run" is told apart from a program that exits 127 itself.
//
// Two kinds of program go through here:
// - a program gpureap chose itself (a debugger, nvidia-smi, a notification command, the MPS
//   front end): exec'd by the descriptor its caller opened and checked (open_program), never
//   by a path resolved again; a clean slate (spawn_hygiene.hpp: descriptors, signals, limits,
//   the working directory "/"); the environment it is given and nothing else; the credentials
//   of the process it acts for when asked; and under a keeper (descendant_sweep.hpp) with an
//   absolute deadline, so that nothing it starts outlives it (start_kept);
// - the job of `gpureap run`: found in PATH as a shell would, with the user's environment,
//   descriptors and limits, its own process group, the terminal's foreground and the job's
//   cgroup (start_process).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "proc/proc_io.hpp"

namespace gpureap {

// Who a program runs as: setgroups, setgid and setuid in the child before exec.
struct Credentials {
  uid_t uid;
  gid_t gid;
  std::vector<gid_t> groups;
};

// Where a start failed. Fork: no process; the others: in the child, before exec.
enum class StartStage { None, Fork, Keeper, Cgroup, Descriptors, Limits, Credentials, Exec };

// "cannot start a process", "cannot drop to the owner's credentials", ...
std::string_view start_stage_words(StartStage stage);

struct StartRequest {
  std::vector<std::string> argv;
  // The file to run: this open descriptor (O_PATH or O_RDONLY; exec'd with execveat
  // AT_EMPTY_PATH), or, when -1, argv[0] looked up in PATH as a shell does (run's job only).
  int program_fd = -1;
  // The whole environment ("NAME=value"), or gpureap's own when inherit_environment.
  std::vector<std::string> environment;
  bool inherit_environment = false;
  // Dup'd onto 0, 1 and 2; -1 leaves gpureap's own.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // A program gpureap chose: descriptors above 2 closed, every signal at its default,
  // resource limits reset, working directory "/". Off for run's job, which keeps what the user
  // gave gpureap but for the dispositions gpureap changed itself (SIGPIPE, SIGTTIN, SIGTTOU).
  bool clean_slate = true;
  sigset_t mask{};  // the child's signal mask (empty unless set)
  std::optional<Credentials> run_as;
  int terminal_fd = -1;      // hand the foreground of this terminal to the child, or -1
  int cgroup_dir_fd = -1;    // born in this cgroup (clone3), or -1
  int cgroup_procs_fd = -1;  // its cgroup.procs, for kernels without CLONE_INTO_CGROUP
};

struct StartResult {
  pid_t pid = -1;  // the child, leader of a process group of its own
  StartStage failed_at = StartStage::None;
  int error = 0;   // errno of the failed stage
  bool ok() const { return failed_at == StartStage::None; }
};

// Starts the program as gpureap's child and returns once it has exec'd or failed to (then
// pid is the child that exited 127, still to be reaped, or -1 when none was made).
StartResult start_process(const StartRequest& request);

// A program started under a keeper: gpureap's child is the keeper, the program its child.
// The keeper waits for the program until `deadline`, then kills its process group, then ends
// and reaps every descendant (descendant_sweep.hpp), then reports and exits. The keeper is not
// tied to gpureap's life: gpureap killed mid-run still leaves nothing behind.
struct KeptProgram {
  pid_t keeper = -1;
  procfs::unique_fd keeper_pidfd;  // readable when the keeper exits (-1 before Linux 5.3)
  procfs::unique_fd report;        // what the keeper and the program's child side say
  StartStage failed_at = StartStage::None;  // Fork: no keeper
  int error = 0;
};
KeptProgram start_kept(const StartRequest& request, std::chrono::steady_clock::time_point deadline);

enum class KeptOutcome { NotStarted, Exited, Signalled, TimedOut, Lost };
struct KeptEnd {
  KeptOutcome outcome = KeptOutcome::Lost;  // Lost: the keeper said nothing (it was killed)
  int exit_status = 0;
  int signal = 0;
  StartStage failed_at = StartStage::None;  // NotStarted: where, and its errno
  int error = 0;
  // false where the kernel has no /proc/thread-self/children: then only the program's process
  // group was ended at the deadline, and descendants outside it may remain.
  bool descendants_ended = false;
};
// What the keeper reported, read once the keeper has been reaped.
KeptEnd read_keeper_report(int report_fd);

}  // namespace gpureap
