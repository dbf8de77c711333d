#include "doctor/doctor.hpp"

#include <algorithm>

#include <unistd.h>

namespace gpureap {

namespace {

Diagnosis diagnose_with(SnapshotSource* source, Snapshot& snapshot, const DoctorOptions& options) {
  // Zombies and their parents are shown with their command lines.
  std::vector<pid_t> details;
  for (const auto& [pid, process] : snapshot.table.processes()) {
    if (process.state != 'Z') continue;
    details.push_back(pid);
    details.push_back(process.ppid);
  }
  for (const auto& kfd : snapshot.drm.kfd_processes) details.push_back(kfd.pid);  // named with their command lines
  snapshot.table.load_details(details);

  Diagnosis diagnosis;
  check_driver(snapshot, diagnosis);
  if (snapshot.driver.loaded) check_memory(source, snapshot, options, diagnosis);
  check_drm_memory(snapshot, diagnosis);
  check_kfd_processes(snapshot, options.settle_seconds, diagnosis);
  check_zombies(snapshot, diagnosis);
  check_blocked_processes(snapshot, options.settle_seconds, diagnosis);
  if (options.check_ipc) check_ipc(snapshot, options, diagnosis);
  check_kernel_log(snapshot, options, diagnosis);
  if (options.check_run_supervisors) check_run_supervisors(snapshot, options, diagnosis);
  check_mps(snapshot, options, diagnosis);
  if (snapshot.processes_not_inspected > 0) {
    std::string names;
    std::size_t listed = 0;
    for (const auto& [pid, process] : snapshot.table.processes()) {
      if (process.fd_access != FdAccess::Denied || process.kernel_thread || ++listed > 5) continue;
      names += (names.empty() ? "" : ", ") + std::to_string(pid) + " (" + process.comm + ")";
    }
    diagnosis.notes.push_back(std::to_string(snapshot.processes_not_inspected) +
                              " process(es) could not be inspected (permission denied), e.g. PID " + names +
                              ": GPU holders among them would be invisible" +
                              (::geteuid() == 0 ? "" : "; run as root for a complete diagnosis"));
  }
  // Most severe first; within a severity, by GPU, then as found.
  std::stable_sort(diagnosis.findings.begin(), diagnosis.findings.end(), [](const Finding& a, const Finding& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.gpu.value_or(~0u) < b.gpu.value_or(~0u);
  });
  return diagnosis;
}

}  // namespace

Diagnosis diagnose(SnapshotSource& source, Snapshot& snapshot, const DoctorOptions& options) {
  return diagnose_with(&source, snapshot, options);
}

Diagnosis diagnose_once(Snapshot& snapshot, const DoctorOptions& options) {
  DoctorOptions once = options;
  once.settle_seconds = 0;
  return diagnose_with(nullptr, snapshot, once);
}

int doctor_exit_status(const std::vector<Finding>& findings) {
  int status = 0;
  for (const auto& f : findings) {
    if (f.severity == Severity::Critical) return 2;
    if (f.severity == Severity::Warning) status = 1;
  }
  return status;
}

}  // namespace gpureap
