#include "doctor/doctor_fix.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <set>

#include <fmt/format.h>

#include "text/human_format.hpp"
#include "doctor/ipc_removal.hpp"
#include "kill/interrupt_guard.hpp"
#include "kill/kill_execution.hpp"
#include "kill/kill_run.hpp"
#include "spawn/timed_command.hpp"

namespace gpureap {
namespace {

bool chosen(const FixOptions& options, FindingId id) {
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
  EndRequest request;
  for (const FixAction* a : actions) {
    request.pids.insert(request.pids.end(), a->pids.begin(), a->pids.end());
    result.description += (result.description.empty() ? "" : "; ") + a->description;
  }
  result.finding_id = actions.front()->finding_id;
  request.timeout_s = options.timeout_s;
  request.verify_timeout_s = options.verify_timeout_s;
  request.protect = options.protect;
  request.audit = options.audit;
  EndResult ended;
  InterruptGuard interrupts;  // doctor --fix runs on the command's main thread
  request.interruption = interrupts.interruption();
  try {
    ended = end_chosen_pids(source, snapshot, request);
  } catch (const std::runtime_error& error) {
    result.outcome = FixOutcome::Failed;
    result.message = std::string(error.what()) + "; stopped before sending further signals";
    return result;
  }
  if (ended.report.interrupted_by != 0) {
    // The ladder caught Ctrl-C (or a hangup) only to continue what it had stopped: now that
    // nothing is stopped, the user's request stands, and no further fix may run.
    ::raise(ended.report.interrupted_by);
  }
  result.outcome = kill_verdict(ended.report) == KillVerdict::Ok ? FixOutcome::Done : FixOutcome::Failed;
  result.message = describe_outcomes(ended.report);
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

std::string ipc_object_name(const Diagnosis& diagnosis, const FixAction& action) {
  switch (action.kind) {
    case FixAction::Kind::RemoveSysvShm:
      return fmt::format("System V shared memory segment {}", diagnosis.ipc.shm.at(action.ipc_index).shmid);
    case FixAction::Kind::RemoveSysvSem:
      return fmt::format("System V semaphore set {}", diagnosis.ipc.semaphores.at(action.ipc_index).semid);
    default: return diagnosis.ipc.posix.at(action.ipc_index).path;
  }
}

// Audited like a signal: the "removing" line is on disk before the object is touched; a log
// that cannot be written stops the removal.
FixResult remove_ipc(const Diagnosis& diagnosis, const FixAction& action, const DoctorOptions& doctor_options,
                     const Snapshot& snapshot, const AuditLog* audit) {
  AuditRemovalRecord record{AuditStage::Sending, ipc_object_name(diagnosis, action),
                            fmt::format("doctor --fix: {}", finding_id_name(action.finding_id)), ""};
  try {
    if (audit) audit->write(record);
  } catch (const std::runtime_error& error) {
    return {action.finding_id, action.description, FixOutcome::Failed,
            std::string(error.what()) + "; not removed"};
  }
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
  record.stage = AuditStage::Sent;
  record.result = fmt::format("{}: {}", removal_outcome_name(removal.outcome), removal.message);
  try {
    if (audit) audit->write(record);
  } catch (const std::runtime_error& error) {
    removal.message += fmt::format(" ({})", error.what());
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

const std::vector<FindingId>& fixable_finding_ids() {
  static const std::vector<FindingId> ids = {FindingId::OrphanedHolders, FindingId::UnlistedHolders,
                                             FindingId::Zombie,          FindingId::LeftoverSysvShm,
                                             FindingId::LeftoverSysvSem, FindingId::LeftoverPosixShm,
                                             FindingId::MemoryLeak};
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
      results.push_back(remove_ipc(diagnosis, *a, doctor_options, snapshot, options.audit));
    }
  }
  return results;
}

FixResult reset_gpu(unsigned gpu, const std::string& device_id, std::chrono::milliseconds timeout) {
  FixResult result{FindingId::MemoryLeak, fmt::format("reset GPU {} (nvidia-smi -r -i {})", gpu, device_id),
                   FixOutcome::Failed, ""};
  if (device_id.empty() || device_id.find_first_not_of("0123456789") == std::string::npos) {
    // An index names whichever GPU the driver counts Nth now: one that fell off the bus shifts it.
    result.message = fmt::format("not reset: GPU {} has no UUID or PCI bus id to name it by", gpu);
    return result;
  }
  TimedCommand command;
  command.argv = {"nvidia-smi", "-r", "-i", device_id};
  command.timeout = timeout;  // a reset of a wedged GPU can hang in the driver
  const TimedRun run = run_timed_command(command);
  if (run.outcome == TimedOutcome::NotStarted) {
    result.message = "could not run nvidia-smi: " + run.error;
    return result;
  }
  if (run.outcome == TimedOutcome::TimedOut) {
    result.message = fmt::format("nvidia-smi -r -i {} did not finish within {:.1f} s and was killed; the GPU may be "
                                 "in a bad state: check it with nvidia-smi, and reboot if it does not answer",
                                 device_id, std::chrono::duration<double>(timeout).count());
    return result;
  }
  std::string text = run.output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (auto& c : text) c = c == '\n' ? ' ' : c;
  result.outcome = run.ok() ? FixOutcome::Done : FixOutcome::Failed;
  result.message = run.ok() ? text : fmt::format("nvidia-smi {}: {}", describe_timed_run(run, timeout), text);
  return result;
}

}  // namespace gpureap
