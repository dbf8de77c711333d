// The kernel-lock protocol that gives simulated contexts real driver lifetimes.
//
// The real driver frees a context when the last descriptor of its device files closes, and
// lists the process only while that process lives. Two kinds of kernel lock mirror exactly
// that, with no /proc scan:
//
//  * allocs/<id>.hold: flock(LOCK_SH) through a descriptor opened WITHOUT O_CLOEXEC. flock
//    locks belong to the open file description, so fork()ed children inherit the lock with
//    the descriptor, and it drops only when the last process holding it closes it or exits.
//  * allocs/<id>.owner: a POSIX fcntl write lock. POSIX locks belong to the process, are not
//    inherited by fork and drop when the owner exits: "is the owner alive?".
//
// Caveat of POSIX locks: a process loses them when it closes ANY descriptor of the file, and
// F_GETLK never reports a process's own locks, so the owner must not probe its own context.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.hpp"

namespace gpusim {

// Owner side. Creates the hold and owner files and takes both locks. The descriptors stay
// open for the life of the process (hold_fd is deliberately inheritable).
struct ContextLocks {
  int hold_fd = -1;
  int owner_fd = -1;
};
Result<ContextLocks> acquire_context_locks(const std::string& hold_path,
                                           const std::string& owner_path);

// Observer side.
enum class Probe { Yes, No, Gone };  // Gone: the file no longer exists (context deleted)

// Yes while any process still shares the hold lock. Unexpected errors answer Yes: when in
// doubt the memory stays allocated, which is the safe direction for a leak detector's tests.
Probe probe_held(const std::string& hold_path);

// Yes while the owner process is alive.
Probe probe_owner_alive(const std::string& owner_path);

// The same through the owner file opened once (open_owner_file, -1 when it cannot be opened)
// and asked again at each probe: the lock is the inode's, so each answer is as exact as a
// fresh open's. A caller keeps it only while the context's record is listed, and asks by
// path once the answer is no (the file may be gone).
int open_owner_file(const std::string& owner_path);
Probe probe_owner_alive(int owner_fd);

// Records when the context was first seen without holders. Atomic: the first observer wins
// (link() of a fully written temp file); later callers get the winner's time. Returns the
// stamp in CLOCK_REALTIME nanoseconds.
Result<std::int64_t> stamp_released(const std::string& released_path, std::int64_t now_ns);

// Reads an existing stamp; Error if there is none.
Result<std::int64_t> read_released(const std::string& released_path);

}  // namespace gpusim
