// The MPS side of the simulated CUDA program. As the CUDA driver does at cuInit, it tries the
// control daemon; when one answers, the program's contexts are created through the server the
// daemon assigns (MPS client contexts, listed by nvmlDeviceGetMPSComputeRunningProcesses),
// and its fate is tied to that server's (see mps/server.cpp).
#pragma once

#include <optional>
#include <vector>

#include "common/lock_protocol.hpp"
#include "common/result.hpp"
#include "cuda/options.hpp"

namespace gpusim::cuda {

// Exit statuses of an MPS client.
inline constexpr int kExitMpsServerNotReady = 5;  // refused or faulted: cudaErrorMpsServerNotReady
inline constexpr int kExitMpsTerminated = 6;      // ended by terminate_client: cudaErrorMpsClientTerminated

struct MpsSession {
  int fd = -1;
  unsigned server_pid = 0;
};

// Only where $CUDA_MPS_PIPE_DIRECTORY names a directory whose daemon accepts the connection
// (the simulator never joins a daemon at the default /tmp/nvidia-mps, which may be a real
// one); nullopt: run without MPS, as CUDA does when the connection fails. Blocks while the
// daemon makes this client wait for another user's server to end.
Result<std::optional<MpsSession>> join_mps(int* exit_status);

// The client's life after READY: until a termination signal (which, with work outstanding,
// ends it as a signal death and so faults the server), --exit-after (a clean detach), or
// terminate_client (its contexts are released; with --mps-on-terminate exit it exits with
// kExitMpsTerminated, with stay it lingers without GPU memory until signalled).
int mps_client_life(const MpsSession& session, const Options& opts, std::vector<ContextLocks>& contexts);

}  // namespace gpusim::cuda
