#include "kill/zombie_parent.hpp"

#include <csignal>

#include "kill/pid_ref.hpp"

namespace gpureap {

NudgeResult nudge_zombie_parent(pid_t parent, std::uint64_t parent_start_ticks, const std::string& proc_root,
                                const std::string& reason, const AuditLog* audit) {
  NudgeResult result;
  if (parent <= 1) return result;  // init reaps on its own; PID 1 is never signalled
  PinResult pin = PidRef::pin(parent, parent_start_ticks, proc_root);
  if (pin.status != PinStatus::Ok) return result;
  AuditRecord record{AuditStage::Sending, parent, parent_start_ticks, SIGCHLD, reason, 0};
  if (audit) audit->write(record);
  result.error = pin.ref.send_signal(SIGCHLD);
  result.status = result.error == 0 ? NudgeStatus::Sent : NudgeStatus::Failed;
  record.stage = AuditStage::Sent;
  record.result_errno = result.error;
  if (audit) audit->write(record);
  return result;
}

}  // namespace gpureap
