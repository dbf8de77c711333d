// `gpureap doctor`: explains where GPU memory went and how to get it back. Each check turns
// what the snapshot, the kernel log and /proc say into findings; the fixes it may apply are
// collected alongside, so that --fix acts on exactly what was shown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "doctor/finding.hpp"
#include "doctor/ipc_leftovers.hpp"
#include "doctor/xid_event.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

struct DoctorOptions {
  double settle_seconds = 3;   // how long unexplained memory is re-measured for a release in progress
  std::optional<std::uint64_t> tolerance_bytes;  // unattributed memory below this is normal
  std::string kernel_log;      // a dmesg/journalctl file; "" reads /dev/kmsg
  bool no_kernel_log = false;
  std::optional<double> xid_max_age_seconds;  // --since: older Xid events (whose age is known) are ignored
  std::string kmsg_path = "/dev/kmsg";
  std::string shm_dir = "/dev/shm";
  // A dead GPU job's shared memory file is removed by --fix only once unwritten this long
  // (--ipc-min-age): a job being restarted may still reattach it.
  double ipc_min_age_seconds = 600;
  // Leftover System V and /dev/shm objects: off for the exporter, whose scrapes must stay
  // cheap (finding who still maps a /dev/shm file reads every process's maps).
  bool check_ipc = true;
  // Jobs of `gpureap run` whose supervisor is gone (walks the cgroup v2 tree): off for the
  // exporter, as check_ipc.
  bool check_run_supervisors = true;
  // MPS clients waiting for another user's server: off for the exporter, as check_ipc (it reads
  // every process's descriptors when the daemon holds a connection, and looks again 200 ms later).
  bool check_mps_waiting = true;
  std::string proc_root = "/proc";
};

// What --fix may do, each tied to the finding that showed it.
struct FixAction {
  enum class Kind { EndOrphans, ReapZombies, EndZombieParent, RemoveSysvShm, RemoveSysvSem, RemovePosixShm, ResetGpu };
  Kind kind = Kind::EndOrphans;
  FindingId finding_id = FindingId::OrphanedHolders;
  std::optional<unsigned> gpu;
  std::string description;         // for the confirmation list
  std::vector<pid_t> pids;         // processes to end or parents to nudge
  std::size_t ipc_index = 0;       // into Diagnosis::ipc's matching vector
  bool only_when_chosen = false;   // disruptive: applied only when the finding is named with --only
};

struct Diagnosis {
  std::vector<Finding> findings;
  std::vector<std::string> notes;  // what could not be checked, and why
  std::vector<FixAction> fixes;
  IpcLeftovers ipc;
  // For --allow-reset: the GPUs whose memory no process explains.
  std::vector<unsigned> leaked_gpus;
};

// Unattributed memory up to this is normal on `gpu`: --tolerance-mib, else the driver's
// per-context overhead (overhead_tolerance_bytes for the processes it lists).
std::uint64_t tolerance_bytes(const GpuView& gpu, const DoctorOptions& options);

Diagnosis diagnose(SnapshotSource& source, Snapshot& snapshot, const DoctorOptions& options);
// The same checks over `snapshot` alone, each measured once: the driver is not read again and
// nothing is waited for (settle_seconds is taken as 0, so a release in progress reads as a
// leak). For callers that read the driver on a schedule of their own: export's collections,
// watch's full scans.
Diagnosis diagnose_once(Snapshot& snapshot, const DoctorOptions& options);

// 0 healthy (info at most), 1 warnings, 2 critical findings.
int doctor_exit_status(const std::vector<Finding>& findings);

// The checks, one per concern (doctor/*.cpp); each appends findings and the fixes they allow.
void check_driver(const Snapshot& snapshot, Diagnosis& diagnosis);
// `source` null: no re-measuring (a release in progress reads as a leak).
void check_memory(SnapshotSource* source, const Snapshot& snapshot, const DoctorOptions& options,
                  Diagnosis& diagnosis);
// AMD GPUs (DRM): VRAM used beyond what their clients and KFD processes report.
void check_drm_memory(const Snapshot& snapshot, Diagnosis& diagnosis);
// ROCm: KFD processes holding VRAM whose job is over (gone, zombie, stuck in D, or a gone
// group or session leader).
void check_kfd_processes(const Snapshot& snapshot, double settle_seconds, Diagnosis& diagnosis);
void check_zombies(const Snapshot& snapshot, Diagnosis& diagnosis);
void check_blocked_processes(const Snapshot& snapshot, double settle_seconds, Diagnosis& diagnosis);
void check_ipc(const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis);
void check_kernel_log(const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis);
void check_run_supervisors(const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis);
// MPS: idle servers, and the pipe directory CUDA programs here use ($CUDA_MPS_PIPE_DIRECTORY,
// else /tmp/nvidia-mps) left by a dead daemon; from sockets and files, running no program.
void check_mps(const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis);
// MPS clients of one user waiting for another user's server to lose its clients (read from
// the kernel's socket table; only when a daemon holds a connection other than its server's).
void check_mps_waiting_clients(const Snapshot& snapshot, Diagnosis& diagnosis);

// The NVML index of the GPU at this PCI location (the function ignored), nullopt when the
// driver lists none there: an Xid line names the GPU by PCI address only.
std::optional<unsigned> gpu_at_pci(const Snapshot& snapshot, const PciLocation& pci);

}  // namespace gpureap
