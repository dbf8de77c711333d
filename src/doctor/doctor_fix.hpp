// `doctor --fix`: the remedies doctor may apply itself, on the snapshot it diagnosed.
// Processes go through the kill engine (pinned by pidfd from that snapshot's start times,
// protected names and identity refusals included); IPC objects are re-checked right before
// removal; a GPU is reset only when asked (--allow-reset) and its preconditions hold.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "doctor/doctor.hpp"
#include "audit/audit_log.hpp"
#include "kill/protected_processes.hpp"

namespace gpureap {

enum class FixOutcome { Done, Failed, Skipped };
std::string fix_outcome_name(FixOutcome outcome);  // "done", "failed", "skipped"

// What --fix did with one action.
struct FixResult {
  std::optional<FindingId> finding_id;  // none for "nothing to fix"
  std::string description;
  FixOutcome outcome = FixOutcome::Failed;
  std::string message;  // for a person
};

struct FixOptions {
  std::vector<FindingId> only;  // findings the user chose; empty: every safe fix
  bool allow_reset = false;
  double timeout_s = 10;          // SIGTERM → SIGKILL
  double verify_timeout_s = 30;   // waiting for the driver to release the memory
  std::vector<std::string> protect;  // extra protected names (config)
  const AuditLog* audit = nullptr;
};

// The finding ids --only accepts.
const std::vector<FindingId>& fixable_finding_ids();

// What --fix will do: with --only, every action of those findings (disruptive ones included);
// otherwise the safe ones. Resets only with allow_reset.
std::vector<const FixAction*> choose_fixes(const Diagnosis& diagnosis, const FixOptions& options);

// Ends processes, nudges zombies' parents and removes IPC objects. Resets are left out: they
// need gpureap's own NVML handle closed first (see reset_gpu).
std::vector<FixResult> apply_fixes(SnapshotSource& source, Snapshot& snapshot, const Diagnosis& diagnosis,
                                   const std::vector<const FixAction*>& actions, const FixOptions& options,
                                   const DoctorOptions& doctor_options);

// Runs `nvidia-smi -r -i <device_id>` (run_timed_command: no shell, nvidia-smi from an
// absolute PATH entry only) and reports what it said; killed (and reported) when it runs past
// `timeout`. device_id is GPU `gpu`'s UUID or PCI bus id, never an index: an index names
// whichever GPU the driver counts Nth when nvidia-smi starts, and a GPU fallen off the bus
// shifts the others. The caller has checked the preconditions on a fresh snapshot and closed
// its own NVML library.
FixResult reset_gpu(unsigned gpu, const std::string& device_id, std::chrono::milliseconds timeout = std::chrono::minutes(2));

}  // namespace gpureap
