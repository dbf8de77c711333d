// Attaching to GPUs and creating contexts, the way the CUDA runtime does it.
#pragma once

#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/layout.hpp"
#include "common/lock_protocol.hpp"
#include "common/result.hpp"
#include "cuda/options.hpp"

namespace gpusim::cuda {

// Identity the driver records for the owner of each context.
struct Owner {
  unsigned host_pid = 0;  // read_host_pid_link: the PID the host's /proc gives
  unsigned ns_pid = 0;    // getpid()
  std::string name;       // comm
};
Result<Owner> identify_self();

// Failure with the exit status to end with.
struct AttachError {
  std::string message;
  int exit_status = kExitError;
};

// Opens nvidiactl, nvidia-uvm, nvidia<minor> of every GPU used and the MIG capability nodes of
// the instances used. (An NVML client opens nothing here: its library does.) Descriptors are left open and
// inheritable (no O_CLOEXEC), as CUDA leaves them; their numbers are returned.
Result<std::vector<int>> open_device_files(const Layout& layout, const Config& config,
                                           const Options& opts, AttachError* err);

// Checks capacity (like cudaMalloc, under allocs/.lock so concurrent starts cannot overcommit),
// then creates one context per --alloc: hold and owner locks first, the record last, so an
// observer never sees a record without its locks.
Result<std::vector<ContextLocks>> create_contexts(const Layout& layout, const Config& config,
                                                  const Options& opts, const Owner& owner,
                                                  AttachError* err);

}  // namespace gpusim::cuda
