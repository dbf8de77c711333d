// D-state processes for `gpureap doctor`: what a process in uninterruptible sleep waits in,
// for how long (only when the kernel says), and which mounts its open files sit on, with
// network filesystems (NFS above all) called out, since a hung server is the classic reason
// a GPU process cannot be killed and its memory stays allocated.
//
// Never hangs on the stuck process: it reads only /proc files that do not wait on the
// process or its filesystems, and it never stat()s, opens or accesses the paths the process
// has open; those are readlink() strings matched against the process's own mountinfo.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpureap {

struct MountRef {
  std::string mount_point;  // as the process sees it, escapes decoded
  std::string fs_type;      // "nfs4", "ext4", "fuse.sshfs"...
  std::string source;       // "server:/export", "/dev/sda1"...
  bool network = false;     // is_network_filesystem(fs_type)
};

struct BlockedFile {
  std::string path;  // the link target as the kernel gave it, " (deleted)" kept
  std::string what;  // "fd 7", "cwd", "root", "exe"
  std::optional<MountRef> mount;  // nullopt when mountinfo was unreadable or nothing matched
};

// A thread of the process in D (multi-threaded programs often block in a worker thread).
struct BlockedThread {
  int tid = 0;
  std::string wchan;  // "" when unknown
};

struct BlockedIoDetails {
  int pid = 0;
  std::uint64_t start_time_ticks = 0;  // identifies the process with the snapshot's record
  char state = '?';
  std::string wchan;  // "" when unknown (the kernel hides it as "0", or it was running)
  std::optional<std::uint64_t> context_switches;  // voluntary + nonvoluntary, from status
  // How long it has been in its current uninterruptible sleep, at least: schedstats'
  // block_start against the scheduler clock it was taken from (see blocked_seconds_from).
  // nullopt unless the kernel says: no schedstats, or no way to read that clock now.
  std::optional<double> blocked_since_seconds;
  std::vector<BlockedFile> files;  // cwd, root (if not "/"), exe, then fds with path targets
  std::size_t files_omitted = 0;   // fds beyond kMaxBlockedFiles (still searched for mounts)
  std::vector<MountRef> network_mounts;  // distinct network mounts among all files
  std::vector<BlockedThread> blocked_threads;  // every thread in D, main thread included
  std::optional<std::string> kernel_stack;  // /proc/<pid>/stack when readable (root)
  std::optional<std::string> error;  // one line for a person when something was not read
};

inline constexpr std::size_t kMaxBlockedFiles = 256;
inline constexpr std::size_t kMaxKernelStackLines = 16;

// Inspects <proc_root>/<pid>. Reads through one directory fd, so everything reported belongs
// to one process even if it exits meanwhile (error then says it is gone).
BlockedIoDetails inspect_blocked_process(const std::string& proc_root, int pid);

// Filesystems whose I/O waits on a server, so a lost or slow server leaves processes in D.
// Kernel clients: nfs, nfs4, cifs, smb3, smbfs, ncpfs, afs, coda, 9p, ceph, glusterfs,
// lustre, gpfs, beegfs, fhgfs, orangefs, pvfs2, panfs, wekafs, davfs, and the cluster
// filesystems ocfs2, gfs2 (their locks go over the network). FUSE clients, "fuse.<name>":
// glusterfs, sshfs, s3fs, ceph, ceph-fuse, rclone, gcsfuse, goofys, juicefs, mountpoint-s3,
// blobfuse, blobfuse2, alluxio-fuse, mfs (MooseFS, LizardFS), quobyte, seaweedfs, davfs.
// Exact names only ("nfsd" is the NFS server's control filesystem). Plain "fuse" is not
// counted: the daemon behind it may well be local.
bool is_network_filesystem(std::string_view fs_type);

// The mount holding `path` in mountinfo text: the longest mount point that is a whole-
// component prefix of path ("/mnt/data" holds "/mnt/data/x", not "/mnt/database"); among
// equal mount points the last line wins (it is mounted on top). Octal escapes (\040 for a
// space) are decoded; a " (deleted)" suffix on path is ignored. nullopt for paths that are
// not absolute ("socket:[123]", "anon_inode:[eventfd]") or when no line parses.
std::optional<MountRef> mount_for_path(std::string_view mountinfo_text, std::string_view path);

// Seconds in the current uninterruptible sleep from the text of /proc/<pid>/sched
// ("block_start", or "se.statistics.block_start" before Linux 5.16) and of the scheduler
// debug file (/proc/sched_debug, or debugfs sched/debug since 5.13), whose per-CPU ".clock"
// is the clock block_start was taken with. The latest .clock is itself a past reading, so
// the result is a lower bound. nullopt when either value is missing or block_start is 0
// (schedstats off, or switched on after the process went to sleep).
std::optional<double> blocked_seconds_from(std::string_view sched_text,
                                           std::string_view sched_debug_text);

// Progress between two looks: the same process (same start time), still D, context switches
// unchanged -> it has not run in between.
struct BlockedSample {
  int pid = 0;
  std::uint64_t start_time_ticks = 0;
  char state = '?';
  std::optional<std::uint64_t> context_switches;
  double taken_at_monotonic = 0;  // CLOCK_MONOTONIC seconds
};

// stat and status of <proc_root>/<pid>; nullopt when gone or unreadable.
std::optional<BlockedSample> sample_blocked(const std::string& proc_root, int pid);

// True only when both samples name the same process, both show D, the switch counts are
// known and equal, and `second` was taken after `first`.
bool stayed_blocked(const BlockedSample& first, const BlockedSample& second);

}  // namespace gpureap
