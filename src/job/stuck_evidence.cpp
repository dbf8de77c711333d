#include "job/stuck_evidence.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "kill/pid_ref.hpp"
#include "spawn/debugger_commands.hpp"
#include "proc/proc_io.hpp"
#include "spawn/timed_command.hpp"

namespace gpureap::job {
namespace {

// Runs argv with stdout and stderr into `output_path`; its process group is killed after
// `timeout`. A note when it failed or timed out.
std::string run_tool(const std::vector<std::string>& argv, const std::string& output_path,
                     std::chrono::seconds timeout) {
  procfs::unique_fd out(open(output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600));
  if (!out) return fmt::format("cannot write {}: {}", output_path, std::strerror(errno));
  TimedCommand command;
  command.argv = argv;
  command.timeout = timeout;
  command.output = TimedCommand::Output::ToFile;
  command.output_fd = out.get();
  const TimedRun run = run_timed_command(command);
  if (run.outcome == TimedOutcome::NotStarted) return run.error;
  if (run.outcome == TimedOutcome::TimedOut) {
    return fmt::format("{} did not finish within {} s and was stopped", argv.front(), timeout.count());
  }
  if (!run.ok()) return fmt::format("{} failed (see {})", argv.front(), output_path);
  return {};
}

}  // namespace

void dump_process(const DumpSettings& settings, const std::string& exe_basename, bool uses_gpu,
                  std::uint64_t start_time_ticks, ProcessEvidence& evidence) {
  auto dump = [&](const std::vector<std::string>& argv, const char* tool) {
    // A debugger attaches by PID: only to the process we pinned, and its output is kept only
    // when that process lived through the whole dump (so the PID never named another).
    const PinResult pin = PidRef::pin(evidence.pid, start_time_ticks, settings.proc_root);
    if (pin.status != PinStatus::Ok) {
      evidence.notes.push_back(fmt::format("no {} dump: PID {} is no longer the job's process", tool, evidence.pid));
      return;
    }
    const PidRef& target = pin.ref;
    const auto before = target.read_stat(settings.proc_root);
    const bool stopped_before = before && (before->state == 'T' || before->state == 't');
    const std::string file = fmt::format("{}/{}.{}.txt", settings.directory, evidence.pid, tool);
    std::string note = run_tool(argv, file, settings.timeout);
    const auto after = target.read_stat(settings.proc_root);
    if (!after || after->start_time_ticks != start_time_ticks) {
      ::unlink(file.c_str());
      evidence.notes.push_back(fmt::format("PID {} ended during the {} dump: its output, which may describe another "
                                           "process, was discarded",
                                           evidence.pid, tool));
      return;
    }
    // A debugger killed while attached can leave its target in a group stop.
    if (after->state == 'T' && !stopped_before) {
      const int rc = target.send_signal(SIGCONT);
      evidence.notes.push_back(rc == 0 ? fmt::format("{} left PID {} stopped: it was continued", tool, evidence.pid)
                                       : fmt::format("{} left PID {} stopped and it could not be continued: {}", tool,
                                                     evidence.pid, std::strerror(rc)));
    }
    struct stat st{};
    if (stat(file.c_str(), &st) == 0 && st.st_size > 0) evidence.dump_files.push_back(file);
    if (!note.empty()) evidence.notes.push_back(std::move(note));
  };
  const bool in_d = evidence.state == 'D';
  if (looks_like_python(exe_basename)) {
    if (!find_executable("py-spy").empty()) {
      dump(py_spy_command(evidence.pid, in_d), "py-spy");
      return;
    }
    evidence.notes.push_back("py-spy is not installed: a Python stack needs `" +
                             command_line(py_spy_command(evidence.pid, in_d)) + "`");
  }
  if (!uses_gpu && !looks_like_python(exe_basename)) return;  // a debugger per helper process costs too much
  if (in_d) {
    evidence.notes.push_back("no gdb backtrace: attaching waits until it leaves the kernel call (see kernel_stack)");
    return;
  }
  if (!find_executable("gdb").empty()) {
    dump(gdb_command(evidence.pid), "gdb");
  } else {
    evidence.notes.push_back("gdb is not installed: no native stack");
  }
}

}  // namespace gpureap::job
