// `gpureap run`: a job guard that owns its whole process tree. It becomes a child subreaper,
// starts the command in its own process group and (when it can) its own cgroup v2, forwards
// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGTSTP, SIGCONT and SIGWINCH to the job's
// group (stopping with it on the terminal's Ctrl-Z, as a shell's job does), reaps every orphan
// that falls to it (also as PID 1 of a container), watches the job (its GPU users, its CPU and
// GPU activity; a look also just before the first stop signal is forwarded, so that a job
// stopped between looks has its GPUs verified), and when the job is over ends whatever is left of it with the kill engine's
// ladder and verifies the GPU memory it used was released.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "job/run_report.hpp"
#include "audit/audit_log.hpp"

namespace gpureap::job {

struct RunSettings {
  std::vector<std::string> argv;
  std::chrono::milliseconds kill_timeout{10000};    // SIGTERM to SIGKILL for what is left
  std::chrono::milliseconds verify_timeout{30000};  // for the driver to release the memory
  bool fail_fast = false;
  std::optional<std::chrono::milliseconds> hang_timeout;
  bool dump_on_hang = false;    // run py-spy/gdb on hung or stubborn processes
  std::string evidence_dir;     // where dumps go (created when needed)
  bool use_cgroup = true;
  std::chrono::milliseconds poll_interval{500};
  const AuditLog* audit = nullptr;
  std::string proc_root = "/proc";
  std::string dev_dir = "/dev";
};

// gpureap cannot guard a job here (no signalfd): the job was not started.
class RunSetupError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs the job to its end. Never throws for the job's own failures (they are in the report);
// throws RunSetupError before the job starts, std::runtime_error when the audit log cannot be
// written (the ladder stops). The signals it forwards stay blocked when it returns, so that
// none ends gpureap before its report is written.
RunReport run_job(const RunSettings& settings);

}  // namespace gpureap::job
