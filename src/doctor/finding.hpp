// What doctor reports: findings with evidence and remedies ordered from safest to most
// disruptive. Every check produces these; the text and JSON views only render them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/evidence.hpp"

namespace gpureap {

enum class Severity { Info, Warning, Critical };
std::string_view severity_name(Severity severity);

// How much a remedy can disturb: none (read-only or harmless), low (ends processes of a job
// that is already dead, removes objects nobody uses), medium (ends live processes or restarts
// a service), high (resets a GPU, reloads the driver, reboots).
enum class Risk { None, Low, Medium, High };
std::string_view risk_name(Risk risk);

struct Remedy {
  std::string command;      // exactly what to run; empty when it is an action, not a command
  Risk risk = Risk::None;
  std::string explanation;  // one line: what it does and why it helps
  bool applied_by_fix = false;  // `doctor --fix` does this itself (after asking)
};

// The kinds of finding; their names are stable (JSON "id", --only).
enum class FindingId {
  NoDriver,
  DriverVersionMismatch,
  DriverNotLoaded,
  DriverInitFailed,
  GpuLost,
  GpuError,
  DriverError,
  PersistenceOff,
  InContainer,
  UnverifiablePids,
  OrphanedHolders,
  UnlistedHolders,
  ReleaseInProgress,
  MemoryLeak,
  MemoryUnexplained,  // v1 memory figures: unexplained memory that may be the driver's reservation
  Zombie,
  DState,
  Xid,
  LeftoverSysvShm,
  LeftoverSysvSem,
  LeftoverPosixShm,
  RunSupervisorGone,  // a `gpureap run` job's cgroup whose supervisor was killed
  MpsServerIdle,      // an MPS server holding memory with no client
  MpsStalePipeDirectory,  // an MPS pipe directory whose control daemon is gone
  MpsClientWaiting,   // MPS clients of one user queued behind another user's server
  DrmMemoryUnexplained,  // an AMD GPU's VRAM in use beyond what its DRM clients and KFD processes report
  KfdProcessLeftBehind,  // a ROCm (KFD) process whose job is over while its context holds VRAM
};
std::string_view finding_id_name(FindingId id);  // "orphaned-holders", "xid", ...
std::optional<FindingId> parse_finding_id(std::string_view name);

struct Finding {
  FindingId id = FindingId::NoDriver;  // stable kind
  Severity severity = Severity::Info;
  std::optional<unsigned> gpu;  // NVML index, when the finding concerns one NVIDIA GPU
  std::string gpu_pci;          // PCI address, when it concerns one AMD or Intel (DRM) GPU
  std::string summary;     // one line for a person
  std::vector<std::string> details;  // further lines for a person (evidence in words)
  Evidence evidence;  // machine-readable evidence (docs/doctor-json.md)
  std::vector<Remedy> remedies;  // safest first
};

// The GPU a finding concerns as export's `gpu` label and doctor's JSON show it: the NVML index,
// a DRM GPU's PCI address, or "" when it concerns the host.
std::string finding_gpu_label(const Finding& finding);

}  // namespace gpureap
