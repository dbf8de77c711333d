// Leftover shared memory and semaphores: System V objects (/proc/sysvipc/*) and POSIX objects
// (files in /dev/shm) that still hold RAM, often pinned host buffers of a GPU job, although
// the processes that made and used them are gone. Conservative by design: whatever a live
// process may still use is never reported, so a reused PID or an unreadable process hides an
// object rather than exposing it to removal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpureap {

// One row of /proc/sysvipc/shm. Times are seconds since the epoch (0: never).
struct SysvShmLeftover {
  int key = 0;                // 0: IPC_PRIVATE
  int shmid = -1;
  unsigned mode = 0;          // permission bits plus SHM_DEST (01000) / SHM_LOCKED (02000)
  std::uint64_t size_bytes = 0;
  int creator_pid = 0;        // 0: the creator is not visible from our PID namespace
  int last_pid = 0;           // last shmat/shmdt; 0: never attached
  unsigned attached = 0;      // nattch
  unsigned uid = 0;
  unsigned creator_uid = 0;
  std::int64_t atime = 0, dtime = 0, ctime = 0;
  std::optional<std::uint64_t> rss_bytes;   // absent on kernels without the rss column
  std::optional<std::uint64_t> swap_bytes;
};

// One row of /proc/sysvipc/sem, plus the last PID per semaphore (semctl GETPID) once
// inspected; parsing alone leaves last_pids empty.
struct SysvSemLeftover {
  int key = 0;
  int semid = -1;
  unsigned mode = 0;
  unsigned nsems = 0;
  unsigned uid = 0;
  unsigned creator_uid = 0;
  std::int64_t otime = 0, ctime = 0;
  std::vector<int> last_pids;
};

// A regular file directly in the shm directory: a shm_open object, or "sem.<name>" for a
// sem_open semaphore. The name is stored as found (any bytes but '/').
struct PosixShmLeftover {
  std::string name;
  std::string path;
  std::uint64_t size_bytes = 0;       // st_size
  std::uint64_t allocated_bytes = 0;  // st_blocks * 512: the RAM it really holds
  unsigned uid = 0;
  std::int64_t mtime = 0;             // last written: its age for removal (ctime cannot be set back)
  std::uint64_t device = 0, inode = 0;
  // From the name, when a GPU framework's convention embeds it (PyTorch's "torch_<pid>_...");
  // set only when that PID is gone. What makes the file recognisably a dead GPU job's.
  std::optional<int> creator_pid;
  bool semaphore = false;
};

struct IpcScanOptions {
  std::string proc_root = "/proc";
  std::string shm_dir = "/dev/shm";
  // Objects created, used or changed more recently than this are not reported: a process
  // that is about to attach or open them has had no chance yet.
  double min_age_seconds = 0;
  // remove_posix_shm refuses while some process's fds or maps cannot be read, since that
  // process may hold the file. Set only when a person has accepted the incomplete check.
  bool accept_uninspected_processes = false;
};

struct IpcLeftovers {
  std::vector<SysvShmLeftover> shm;
  std::vector<SysvSemLeftover> semaphores;
  std::vector<PosixShmLeftover> posix;
  // Processes whose fds or maps could not be read (permission): a POSIX object they hold
  // would look unused, so the POSIX results are incomplete and the caller must say so.
  std::size_t processes_not_inspected = 0;
  // Of those, processes with a thread in uninterruptible sleep (D): their files and maps are
  // never read (reading maps could hang on their mmap lock).
  std::vector<int> blocked_pids;
  std::vector<std::string> errors;  // for a person: what could not be read and why
};

IpcLeftovers find_ipc_leftovers(const IpcScanOptions& options);

// Parsers exposed for fixture tests: every well-formed row, not only leftovers; malformed
// lines (the header included) are skipped.
std::vector<SysvShmLeftover> parse_sysv_shm_table(std::string_view text);
std::vector<SysvSemLeftover> parse_sysv_sem_table(std::string_view text);

// The PID embedded in a shm name by a known convention, else nullopt. PyTorch's file_system
// sharing strategy names segments "/torch_<pid>_<random>_<counter>" (older releases:
// "/torch_<pid>_<random>"); its file_descriptor strategy unlinks them at once.
std::optional<int> creator_pid_from_shm_name(std::string_view name);

}  // namespace gpureap
