// --pidns: run the simulated program as PID 1 of a new PID namespace, like a container.
// /proc is NOT remounted, so /proc/self still resolves to the host PID (what the driver
// records), while getpid() answers 1.
#pragma once

#include <sys/types.h>

#include <cstddef>

#include "common/host_pid.hpp"
#include "common/result.hpp"

namespace gpusim::cuda {

// unshare(CLONE_NEWPID), then fork. Returns (ok) in the inner process. The outer process
// never returns: it forwards SIGTERM/SIGINT/SIGHUP to the inner one, waits for it and exits
// with its status (or dies of the same signal). Error when unshare is not permitted.
Status enter_pid_namespace();

// read_host_pid_link() (common/host_pid.hpp) gives the host PID that the driver records.

}  // namespace gpusim::cuda
