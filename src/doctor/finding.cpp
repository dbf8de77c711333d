#include "doctor/finding.hpp"

namespace gpureap {
namespace {

constexpr FindingId kAllFindingIds[] = {
    FindingId::NoDriver,        FindingId::DriverVersionMismatch, FindingId::DriverNotLoaded,
    FindingId::DriverInitFailed, FindingId::GpuLost,              FindingId::GpuError,
    FindingId::DriverError,     FindingId::PersistenceOff,        FindingId::InContainer,
    FindingId::UnverifiablePids, FindingId::OrphanedHolders,      FindingId::UnlistedHolders,
    FindingId::ReleaseInProgress, FindingId::MemoryLeak,          FindingId::MemoryUnexplained,
    FindingId::Zombie,          FindingId::DState,                FindingId::Xid,
    FindingId::LeftoverSysvShm, FindingId::LeftoverSysvSem,       FindingId::LeftoverPosixShm,
    FindingId::RunSupervisorGone, FindingId::MpsServerIdle,
    FindingId::MpsStalePipeDirectory, FindingId::MpsClientWaiting,    FindingId::DrmMemoryUnexplained,
    FindingId::KfdProcessLeftBehind,
};

}  // namespace

std::string_view finding_id_name(FindingId id) {
  switch (id) {
    case FindingId::NoDriver: return "no-driver";
    case FindingId::DriverVersionMismatch: return "driver-version-mismatch";
    case FindingId::DriverNotLoaded: return "driver-not-loaded";
    case FindingId::DriverInitFailed: return "driver-init-failed";
    case FindingId::GpuLost: return "gpu-lost";
    case FindingId::GpuError: return "gpu-error";
    case FindingId::DriverError: return "driver-error";
    case FindingId::PersistenceOff: return "persistence-off";
    case FindingId::InContainer: return "in-container";
    case FindingId::UnverifiablePids: return "unverifiable-pids";
    case FindingId::OrphanedHolders: return "orphaned-holders";
    case FindingId::UnlistedHolders: return "unlisted-holders";
    case FindingId::ReleaseInProgress: return "release-in-progress";
    case FindingId::MemoryLeak: return "memory-leak";
    case FindingId::MemoryUnexplained: return "memory-unexplained";
    case FindingId::Zombie: return "zombie";
    case FindingId::DState: return "d-state";
    case FindingId::Xid: return "xid";
    case FindingId::LeftoverSysvShm: return "leftover-sysv-shm";
    case FindingId::LeftoverSysvSem: return "leftover-sysv-sem";
    case FindingId::LeftoverPosixShm: return "leftover-posix-shm";
    case FindingId::RunSupervisorGone: return "run-supervisor-gone";
    case FindingId::MpsServerIdle: return "mps-server-idle";
    case FindingId::MpsStalePipeDirectory: return "mps-stale-pipe-directory";
    case FindingId::MpsClientWaiting: return "mps-client-waiting";
    case FindingId::DrmMemoryUnexplained: return "drm-memory-unexplained";
    case FindingId::KfdProcessLeftBehind: return "kfd-process-left-behind";
  }
  return "unknown";
}

std::optional<FindingId> parse_finding_id(std::string_view name) {
  for (const FindingId id : kAllFindingIds) {
    if (finding_id_name(id) == name) return id;
  }
  return std::nullopt;
}

std::string_view severity_name(Severity severity) {
  switch (severity) {
    case Severity::Info: return "info";
    case Severity::Warning: return "warning";
    case Severity::Critical: return "critical";
  }
  return "info";
}

std::string_view risk_name(Risk risk) {
  switch (risk) {
    case Risk::None: return "none";
    case Risk::Low: return "low";
    case Risk::Medium: return "medium";
    case Risk::High: return "high";
  }
  return "none";
}

std::string finding_gpu_label(const Finding& finding) {
  if (finding.gpu) return std::to_string(*finding.gpu);
  return finding.gpu_pci;
}

}  // namespace gpureap
