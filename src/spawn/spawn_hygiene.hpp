// What a program gpureap spawns must not inherit: every descriptor but 0, 1 and 2. Some that
// gpureap holds are not close-on-exec and are not its own to mark (cpp-httplib's accepted and
// listening sockets while `watch --listen` serves): a notification command or a debugger must
// never hold a scraper's connection or the listening port.
#pragma once

#include <spawn.h>

namespace gpureap {

// Adds, after the actions already there (the dup2s onto 0, 1, 2), the closing of every
// descriptor from 3 up in the child: glibc's closefrom, close_range(3, ~0U, 0) with its own
// fallback (each descriptor /proc/self/fd lists) on kernels without it. 0, or an errno.
int close_inherited_descriptors(posix_spawn_file_actions_t& actions);

}  // namespace gpureap
