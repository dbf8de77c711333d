// What a person wants to see about a job that hung or would not end on SIGTERM, collected
// before it is killed (killing it destroys the evidence): each process's state, wchan and
// kernel stack (root only), CPU time, and with dumps enabled the output of the debuggers that
// are installed: `py-spy dump --pid N` for Python processes, `gdb -p N -batch -ex 'thread apply
// all bt'` for the others that use a GPU. The same commands doctor names for stuck processes.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace gpureap::job {

struct ProcessEvidence {
  pid_t pid = 0;
  std::string comm;              // raw: render through the sanitiser
  char state = '?';
  std::string wchan;
  std::string kernel_stack;      // /proc/N/stack; empty when not root, unreadable, or a kernel before 5.7 could block the read
  double cpu_seconds = 0;
  std::vector<unsigned> gpus;    // GPU device files held (minor numbers)
  std::optional<unsigned> sm_util_percent;
  std::vector<std::string> dump_files;  // debugger outputs saved for it
  std::vector<std::string> notes;       // a dump that failed or timed out, and why
};

struct DumpSettings {
  std::string directory;   // where the outputs go (created by the caller, 0700)
  std::chrono::seconds timeout{30};  // per debugger run; its process group is killed after it
  std::string proc_root = "/proc";
};

// Runs the debugger(s) for one process (spawn/debugger_commands.hpp), writing
// <dir>/<pid>.<tool>.txt. Adds the files written (and notes for those that failed or were not
// run) to `evidence`. A process in D state gets py-spy --nonblocking only: gdb would wait.
// Each debugger attaches only to the process pinned with `start_time_ticks`; a dump during
// which it ended is discarded, and a target a debugger left stopped is continued.
void dump_process(const DumpSettings& settings, const std::string& exe_basename, bool uses_gpu,
                  std::uint64_t start_time_ticks, ProcessEvidence& evidence);

}  // namespace gpureap::job
