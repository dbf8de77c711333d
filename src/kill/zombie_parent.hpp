// The zombie-parent step shared by `kill --reap-zombies` and `doctor --fix`: a zombie holds
// nothing but its PID; only its parent can reap it, and SIGCHLD reminds a parent that forgot.
// The parent is pinned by the start time the snapshot saw, and the signal is audited.
#pragma once

#include <cstdint>
#include <string>

#include <sys/types.h>

#include "audit/audit_log.hpp"

namespace gpureap {

enum class NudgeStatus {
  Sent,       // SIGCHLD delivered
  NotPinned,  // the parent exited or its PID was reused: nothing sent
  Failed,     // pidfd_send_signal failed: `error`
};

struct NudgeResult {
  NudgeStatus status = NudgeStatus::NotPinned;
  int error = 0;
};

// Throws std::runtime_error when the audit log cannot be written (nothing is then sent).
NudgeResult nudge_zombie_parent(pid_t parent, std::uint64_t parent_start_ticks, const std::string& proc_root,
                                const std::string& reason, const AuditLog* audit);

}  // namespace gpureap
