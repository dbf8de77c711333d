// The end of a job under `gpureap run`: an MPS client left of it has its work ended through
// terminate_client first, as kill does (kill/mps_client_ending); whatever is left gets SIGTERM and
// --kill-timeout to exit (through the kill engine: pinned by pidfd, the job's cgroup frozen
// while it is signalled, every signal audited); what did not exit is described (state,
// wchan, kernel stack, and debugger dumps when asked) and then killed; finally the GPU memory
// the job used is verified released, or the report says who still holds it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "job/job_members.hpp"
#include "job/run_report.hpp"
#include "audit/audit_log.hpp"
#include "nvml/driver_reading.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap::job {

struct EndingSettings {
  std::chrono::milliseconds kill_timeout{10000};
  std::chrono::milliseconds verify_timeout{30000};
  bool dump = false;                   // py-spy/gdb before killing what did not end
  std::string evidence_dir;            // created on first use; a private temporary one when empty
  bool collect_all_evidence = false;   // a hung job: describe every member before the first signal
  const AuditLog* audit = nullptr;
  std::string proc_root = "/proc";
  std::string dev_dir = "/dev";
  MembershipSettings membership;
  std::map<pid_t, unsigned> sm_util;   // per-process SM utilisation at the last sample
  std::function<void()> reap;          // reaps gpureap's children (zombies hold PIDs, not memory)
  std::function<SnapshotSource&()> driver;
  // Looks at the job again (its members, their GPUs, the driver), after SIGTERM's wait.
  std::function<void()> look;
  // The driver at the last look, the baseline (updated by look).
  const std::optional<DriverReading>* last_reading = nullptr;
};

void end_job(const EndingSettings& settings, RunReport& report);

// The evidence for one member, read now (debugger dumps when settings.dump).
ProcessEvidence describe_member(const EndingSettings& settings, const JobMember& member, std::string& evidence_dir);

}  // namespace gpureap::job
