#include "doctor/doctor_fix.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "text/human_format.hpp"
#include "doctor/ipc_removal.hpp"
#include "kill/kill_execution.hpp"
#include "kill/kill_run.hpp"

extern char** environ;

namespace gpureap {
namespace {

bool chosen(const FixOptions& options, const std::string& id) {
  return std::find(options.only.begin(), options.only.end(), id) != options.only.end();
}

std::string describe_outcomes(const KillReport& report) {
  std::string out;
  for (const auto& t : report.targets) {
    out += (out.empty() ? "" : ", ") + fmt::format("PID {} {}", t.pid, kill_outcome_name(t.outcome));
    if (!t.detail.empty() && t.outcome != KillOutcome::ExitedAfterSignal && t.outcome != KillOutcome::Killed) out += " (" + t.detail + ")";
  }
  for (const auto& g : report.gpus) {
    out += g.verified ? fmt::format("; GPU {}: {} freed", g.index, format_bytes(g.freed_bytes))
                      : fmt::format("; GPU {}: {}", g.index, g.message);
  }
  return out;
}

FixResult end_processes(SnapshotSource& source, Snapshot& snapshot, const std::vector<const FixAction*>& actions,
                        const FixOptions& options) {
  FixResult result;
  SelectionCriteria criteria;
  for (const FixAction* a : actions) {
    criteria.pids.insert(criteria.pids.end(), a->pids.begin(), a->pids.end());
    result.description += (result.description.empty() ? "" : "; ") + a->description;
  }
  result.finding_id = actions.front()->finding_id;
  std::sort(criteria.pids.begin(), criteria.pids.end());
  criteria.pids.erase(std::unique(criteria.pids.begin(), criteria.pids.end()), criteria.pids.end());
  const Selection selection = select_targets(snapshot, criteria);
  PlanPolicy policy = PlanPolicy::for_current_process(snapshot);
  for (const auto& name : options.protect) policy.protect.add(name);
  const KillPlan plan = plan_selected(snapshot, selection, policy, criteria.tree);
  auto pins = pin_targets(plan, snapshot);
  KillReport report;
  report.settings.timeout_s = options.timeout_s;
  report.targets = planned_outcomes(plan);
  ExecutionOptions execution;
  execution.engine.first_signal = SIGTERM;
  execution.engine.timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000));
  execution.engine.proc_root = snapshot.table.options().proc_root;
  try {
    execute_plan(plan, pins, snapshot, policy, execution, options.audit, report);
  } catch (const std::runtime_error& error) {
    result.outcome = FixOutcome::Failed;
    result.message = std::string(error.what()) + "; stopped before sending further signals";
    return result;
  }
  if (report.interrupted_by != 0) {
    // The ladder caught Ctrl-C (or a hangup) only to continue what it had stopped: now that
    // nothing is stopped, the user's request stands, and no further fix may run.
    ::raise(report.interrupted_by);
  }
  verify_after_kill(plan, source, snapshot, options.verify_timeout_s, report);
  result.outcome = kill_verdict(report) == KillVerdict::Ok ? FixOutcome::Done : FixOutcome::Failed;
  result.message = describe_outcomes(report);
  return result;
}

FixResult nudge_parent(const Snapshot& snapshot, const FixAction& action, const FixOptions& options) {
  FixResult result{action.finding_id, action.description, FixOutcome::Failed, ""};
  const pid_t pid = action.pids.front();
  const ProcessInfo* parent = snapshot.table.find(pid);
  if (parent == nullptr) {
    result.outcome = FixOutcome::Skipped;
    result.message = "the parent is gone";
    return result;
  }
  const NudgeResult nudge = nudge_zombie_parent(pid, parent->start_time_ticks, snapshot.table.options().proc_root,
                                                "doctor --fix: reap zombie child", options.audit);
  if (nudge.status == NudgeStatus::NotPinned) {
    result.outcome = FixOutcome::Skipped;
    result.message = "the parent exited or its PID was reused; nothing sent";
    return result;
  }
  result.outcome = nudge.status == NudgeStatus::Sent ? FixOutcome::Done : FixOutcome::Failed;
  result.message = nudge.status == NudgeStatus::Sent ? "SIGCHLD sent" : std::string("not sent: ") + std::strerror(nudge.error);
  return result;
}

FixResult remove_ipc(const Diagnosis& diagnosis, const FixAction& action, const DoctorOptions& doctor_options,
                     const Snapshot& snapshot) {
  RemovalResult removal;
  switch (action.kind) {
    case FixAction::Kind::RemoveSysvShm: removal = remove_sysv_shm(diagnosis.ipc.shm.at(action.ipc_index)); break;
    case FixAction::Kind::RemoveSysvSem: removal = remove_sysv_sem(diagnosis.ipc.semaphores.at(action.ipc_index)); break;
    default: {
      IpcScanOptions scan;
      scan.proc_root = snapshot.table.options().proc_root;
      scan.shm_dir = doctor_options.shm_dir;
      removal = remove_posix_shm(diagnosis.ipc.posix.at(action.ipc_index), scan);
    }
  }
  return {action.finding_id, action.description,
          removal.outcome == RemovalOutcome::Removed ? FixOutcome::Done
          : (removal.outcome == RemovalOutcome::Gone || removal.outcome == RemovalOutcome::Changed ||
             removal.outcome == RemovalOutcome::InUse)
              ? FixOutcome::Skipped
              : FixOutcome::Failed,
          removal.message};
}

}  // namespace

std::string fix_outcome_name(FixOutcome outcome) {
  switch (outcome) {
    case FixOutcome::Done: return "done";
    case FixOutcome::Failed: return "failed";
    case FixOutcome::Skipped: return "skipped";
  }
  return "failed";
}

const std::vector<std::string>& fixable_finding_ids() {
  static const std::vector<std::string> ids = {"orphaned-holders",   "unlisted-holders",  "zombie",
                                               "leftover-sysv-shm",  "leftover-sysv-sem", "leftover-posix-shm",
                                               "memory-leak"};
  return ids;
}

std::vector<const FixAction*> choose_fixes(const Diagnosis& diagnosis, const FixOptions& options) {
  std::vector<const FixAction*> out;
  for (const auto& a : diagnosis.fixes) {
    if (a.kind == FixAction::Kind::ResetGpu && !options.allow_reset) continue;
    if (!options.only.empty() ? !chosen(options, a.finding_id) : a.only_when_chosen) continue;
    out.push_back(&a);
  }
  return out;
}

std::vector<FixResult> apply_fixes(SnapshotSource& source, Snapshot& snapshot, const Diagnosis& diagnosis,
                                   const std::vector<const FixAction*>& actions, const FixOptions& options,
                                   const DoctorOptions& doctor_options) {
  std::vector<FixResult> results;
  std::vector<const FixAction*> ends;
  for (const FixAction* a : actions) {
    if (a->kind == FixAction::Kind::EndOrphans || a->kind == FixAction::Kind::EndZombieParent) ends.push_back(a);
  }
  // Nudges first: a parent that reaps its zombie needs no ending.
  for (const FixAction* a : actions) {
    if (a->kind == FixAction::Kind::ReapZombies) results.push_back(nudge_parent(snapshot, *a, options));
  }
  if (!ends.empty()) results.push_back(end_processes(source, snapshot, ends, options));
  for (const FixAction* a : actions) {
    if (a->kind == FixAction::Kind::RemoveSysvShm || a->kind == FixAction::Kind::RemoveSysvSem ||
        a->kind == FixAction::Kind::RemovePosixShm) {
      results.push_back(remove_ipc(diagnosis, *a, doctor_options, snapshot));
    }
  }
  return results;
}

FixResult reset_gpu(unsigned gpu) {
  FixResult result{"memory-leak", fmt::format("reset GPU {} (nvidia-smi -r -i {})", gpu, gpu), FixOutcome::Failed, ""};
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    result.message = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&files, out[1], STDERR_FILENO);
  const std::string index = std::to_string(gpu);
  std::vector<char*> argv = {const_cast<char*>("nvidia-smi"), const_cast<char*>("-r"), const_cast<char*>("-i"),
                             const_cast<char*>(index.c_str()), nullptr};
  pid_t child = -1;
  const int spawned = posix_spawnp(&child, "nvidia-smi", &files, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  ::close(out[1]);
  std::string text;
  if (spawned == 0) {
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(out[0], buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
      if (n > 0) text.append(buffer, static_cast<std::size_t>(n));
    }
  }
  ::close(out[0]);
  if (spawned != 0) {
    result.message = fmt::format("could not run nvidia-smi: {}", std::strerror(spawned));
    return result;
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (auto& c : text) c = c == '\n' ? ' ' : c;
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  result.outcome = ok ? FixOutcome::Done : FixOutcome::Failed;
  result.message = ok ? text : fmt::format("nvidia-smi exited with status {}: {}", WIFEXITED(status) ? WEXITSTATUS(status) : -1, text);
  return result;
}

}  // namespace gpureap
