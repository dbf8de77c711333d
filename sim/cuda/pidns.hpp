// --pidns: run the simulated program as PID 1 of a new PID namespace, like a container.
// /proc is NOT remounted, so /proc/self still resolves to the host PID (what the driver
// records), while getpid() answers 1.
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "common/result.hpp"

namespace gpusim::cuda {

// unshare(CLONE_NEWPID), then fork. Returns (ok) in the inner process. The outer process
// never returns: it forwards SIGTERM/SIGINT/SIGHUP to the inner one, waits for it and exits
// with its status (or dies of the same signal). Error when unshare is not permitted.
Status enter_pid_namespace();

// The PID the host's procfs gives the calling process: what the real driver records. That is
// readlink("/proc/self") unless GPUSIM_HOST_PROC names where the host's procfs is mounted, as
// in a container that mounted a /proc of its own (the real driver sees the host PID there too).
// Writes no more than `size` bytes into `buffer` and allocates nothing (workers call it after
// fork()); returns the length, or -1 with errno.
ssize_t read_host_pid_link(char* buffer, std::size_t size);

}  // namespace gpusim::cuda
