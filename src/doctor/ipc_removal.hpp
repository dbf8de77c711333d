// Removing one leftover IPC object safely, and the checks that finding and removing share.
// Each remove_* looks at the object again right before removing it: it must still be the
// object that was found (same identity), and still unused; otherwise nothing is touched.
// A process that attaches between that last look and the removal keeps working: removal only
// takes the name away (IPC_RMID frees a segment at the last detach, unlink frees a file at
// the last close or unmap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/ipc_leftovers.hpp"

namespace gpureap {

enum class RemovalOutcome {
  Removed,
  Gone,              // already removed: nothing to do
  Changed,           // another object under that id or name now: not touched
  InUse,             // attached, open, mapped or operated on since it was found: not touched
  PermissionDenied,  // we may not remove it, or could not check every process
  Failed,            // refused (a bad name) or an unexpected error
};
struct RemovalResult {
  RemovalOutcome outcome = RemovalOutcome::Failed;
  std::string message;  // for a person: what happened, with the id or path
};

RemovalResult remove_sysv_shm(const SysvShmLeftover& expected);
RemovalResult remove_sysv_sem(const SysvSemLeftover& expected);
RemovalResult remove_posix_shm(const PosixShmLeftover& expected, const IpcScanOptions& options);
std::string_view removal_outcome_name(RemovalOutcome outcome);

// --- Checks shared with find_ipc_leftovers ---

// The process exists: kill(pid, 0) succeeds or says EPERM, or <proc_root>/<pid> exists.
// Errors other than "no such process" count as existing. False for pid <= 0.
bool process_exists(int pid, const std::string& proc_root);

struct FileIdentity {
  std::uint64_t device = 0, inode = 0;
  std::string name;  // its name in the shm directory: the fd links that hold it end with it
};
struct OpenFileScan {
  std::vector<bool> in_use;  // per file: some process holds it open or mapped
  std::size_t processes_not_inspected = 0;  // denied, or skipped in D (blocked_pids)
  std::vector<int> blocked_pids;
  std::vector<std::string> errors;
};
// Looks through the fd links and memory maps of every process under proc_root.
OpenFileScan find_open_or_mapped(const std::vector<FileIdentity>& files,
                                 const std::string& proc_root);

// The live state of a semaphore set, read with semctl. error is the errno when reading
// failed (EINVAL or EIDRM: gone; EACCES: not allowed to read it), else 0.
struct SemSetState {
  int error = 0;
  int key = 0;
  unsigned mode = 0, uid = 0, nsems = 0;
  std::int64_t otime = 0, ctime = 0;
  std::vector<int> last_pids;  // GETPID per semaphore; 0: never operated on (or not visible)
  unsigned waiters = 0;        // processes blocked in semop on it (GETNCNT + GETZCNT)
};
SemSetState read_sem_set_state(int semid);

}  // namespace gpureap
