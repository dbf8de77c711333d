// Small reads of one process's /proc files for the kill engine: stat, the owner, wchan, the
// children lists, and a scan of every stat (for process groups and the ppid fallback).
// Internal to src/kill. Every function takes the proc root so tests can point it elsewhere.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "proc/process_info.hpp"

namespace gpureap::killproc {

constexpr unsigned kPfKthread = 0x00200000;  // PF_KTHREAD in stat's flags

// <proc_root>/<pid>/stat parsed (name cut at the last ')'); nullopt when gone or unreadable.
std::optional<StatFields> read_stat(const std::string& proc_root, pid_t pid);

// Effective uid from <proc_root>/<pid>/status; nullopt when gone or unreadable.
std::optional<uid_t> read_owner_uid(const std::string& proc_root, pid_t pid);

// <proc_root>/<pid>/wchan ("" when unreadable or "0").
std::string read_wchan(const std::string& proc_root, pid_t pid);

// Children of every thread of pid, from <proc_root>/<pid>/task/<tid>/children. nullopt when
// the kernel lacks CONFIG_PROC_CHILDREN (or the process is gone): the caller scans ppids.
std::optional<std::vector<pid_t>> read_children(const std::string& proc_root, pid_t pid);

// Every process's stat in proc_root (those that vanish meanwhile are left out).
std::vector<StatFields> scan_stats(const std::string& proc_root);

}  // namespace gpureap::killproc
