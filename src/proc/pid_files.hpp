// Reads of one process's /proc files by PID, for the kill engine and its tests: stat, the
// owner, wchan, the children lists, the cgroup v2 path, and a scan of every stat (process
// groups, the ppid fallback). Every read goes through a directory fd of <proc_root>/<pid> and
// is bounded (proc_io). A PID can be reused: callers holding a pidfd re-check it after the
// read (PidRef::read_stat) before they report anything from it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "proc/process_info.hpp"

namespace gpureap::procfs {

// <proc_root>/<pid>/stat parsed (name cut at the last ')'); nullopt when gone or unreadable.
std::optional<StatFields> read_stat(const std::string& proc_root, pid_t pid);

// Real and effective uid from <proc_root>/<pid>/status; nullopt when gone or unreadable.
std::optional<StatusFields> read_status(const std::string& proc_root, pid_t pid);

// <proc_root>/<pid>/wchan ("" when unreadable or "0").
std::string read_wchan(const std::string& proc_root, pid_t pid);

// Reading /proc/<pid>/stack takes the trace lock. Before Linux 5.7 that was cred_guard_mutex,
// which execve holds while it reads the binary: a process exec'ing from a dead NFS server
// would hang our read. Since 5.7 it is exec_update_lock, held only briefly.
bool kernel_stack_read_cannot_block();

// <proc_root>/<pid>/stack (at most 64 KiB; root only); nullopt when unreadable, or when this
// kernel could block the read (kernel_stack_read_cannot_block).
std::optional<std::string> read_kernel_stack(const std::string& proc_root, pid_t pid);

// The cgroup v2 path ("0::<path>" line) of <proc_root>/<pid>/cgroup; nullopt when none.
std::optional<std::string> read_cgroup_v2_path(const std::string& proc_root, pid_t pid);

// Children of every thread of pid, from <proc_root>/<pid>/task/<tid>/children. nullopt when
// the kernel lacks CONFIG_PROC_CHILDREN (or the process is gone): the caller scans ppids.
std::optional<std::vector<pid_t>> read_children(const std::string& proc_root, pid_t pid);

// Every process's stat in proc_root (those that vanish meanwhile are left out).
std::vector<StatFields> scan_stats(const std::string& proc_root);

}  // namespace gpureap::procfs
