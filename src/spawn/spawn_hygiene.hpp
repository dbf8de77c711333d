// What a program gpureap starts must not inherit from gpureap, done in the child between fork
// and exec (so with async-signal-safe calls only: raw system calls, no allocation):
// - descriptors: every one above 2 is closed (but the few the start itself still needs), so a
//   helper never holds a scraper's connection, `watch --listen`'s port or a pinned /proc dir;
// - signals: none blocked, none ignored (gpureap blocks those its signalfd reads and ignores
//   SIGPIPE);
// - resource limits: none that gpureap changed for itself (see reset_resource_limits);
// - credentials: those of the process on whose behalf it runs, when asked (drop_credentials).
#pragma once

#include <sys/types.h>

namespace gpureap::spawn_child {

// Closes every descriptor from 3 up except `keep` (up to two, -1 for none). 0, or an errno.
int close_descriptors_except(int keep_a, int keep_b);

// Every catchable signal back to its default disposition; the mask is the caller's to set.
void default_signal_dispositions();

// The limits a program gpureap chose starts with, whatever gpureap set for itself:
// RLIMIT_CORE soft 0 (a helper run as root leaves no core in someone's directory);
// RLIMIT_NOFILE soft min(1024, hard) (gpureap raises it to pin a tree with pidfds; programs
// that select() break above 1024); RLIMIT_DATA and RLIMIT_AS soft = hard (fleet caps its own
// heap). Other limits are inherited: they are the administrator's, not gpureap's. 0 or an errno.
int reset_resource_limits();

// At most this many supplementary groups (read back on the child's stack).
inline constexpr int kMaxGroups = 256;

// setgroups, setresgid, setresuid (raw system calls: this thread is the whole process), each
// then read back and compared; then PR_SET_NO_NEW_PRIVS, so that no setuid file it runs can
// give back what was dropped. 0, or the errno of the step that failed (EPERM when a read-back
// differs).
int drop_credentials(uid_t uid, gid_t gid, const gid_t* groups, int group_count);

}  // namespace gpureap::spawn_child
