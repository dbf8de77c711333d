// The PID the host's procfs gives the calling process: what a real driver records (NVIDIA's for a
// context, amdkfd for a KFD process: lead_thread->pid, the PID in the initial namespace), while
// getpid() answers in the caller's own PID namespace.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace gpusim {

// readlink("/proc/self") unless GPUSIM_HOST_PROC names where the host's procfs is mounted, as in
// a container that mounted a /proc of its own (the real driver sees the host PID there too).
// Without a remount of /proc, a process in a child PID namespace still reads the host PID there.
// Writes no more than `size` bytes into `buffer` and allocates nothing (callable after fork());
// returns the length, or -1 with errno.
ssize_t read_host_pid_link(char* buffer, std::size_t size);

// The same as a number; 0 when it cannot be read.
pid_t host_pid();

}  // namespace gpusim
