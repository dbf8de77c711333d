// Forked helpers: DataLoader-style workers that inherit every descriptor (and with them the
// contexts' hold locks), and a child left as a zombie.
#pragma once

#include <sys/types.h>

#include <vector>

#include "common/result.hpp"
#include "cuda/options.hpp"

namespace gpusim::cuda {

struct Worker {
  pid_t pid = 0;          // in our namespace (for waitpid)
  unsigned host_pid = 0;  // as the host sees it (reported in READY)
};

// Forks `count` workers (plain fork, no exec). Each one reports its host PID over a pipe and
// then sleeps until killed. Returns once every worker has reported.
Result<std::vector<Worker>> fork_workers(unsigned count, WorkerMode mode, TermPolicy on_sigterm);

// SIGTERM to each still unreaped worker, then waits for every one: the owner's clean exit
// with --workers-at-exit join. Only children not yet reaped, so no PID can have been reused.
void join_workers(const std::vector<pid_t>& unreaped);

// Forks a child that exits at once; the caller never waits for it.
Status fork_zombie();

}  // namespace gpusim::cuda
