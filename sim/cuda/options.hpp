// Command line of gpusim-cuda, the simulated CUDA application.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/alloc_record.hpp"
#include "common/result.hpp"

namespace gpusim::cuda {

// Exit statuses, so tests can tell a refused start from a crash.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;         // bad state, missing device, lost GPU...
inline constexpr int kExitUsage = 2;
inline constexpr int kExitOutOfMemory = 3;   // like cudaErrorMemoryAllocation
inline constexpr int kExitNoPidNamespace = 4;  // unshare(CLONE_NEWPID) not permitted

// --alloc GPU:SIZE[:TYPE[:GI]]
struct AllocSpec {
  unsigned gpu = 0;
  std::uint64_t bytes = 0;
  ProcType type = ProcType::Compute;
  std::optional<unsigned> gi;
};
Result<AllocSpec> parse_alloc_spec(const std::string& text);

enum class WorkerMode { Survive, DieWithParent };

// What the owner does with its live workers when it ends normally (--exit-after, or a
// termination signal under the exit/slow policy). Leave: nothing, they are on their own (a
// crash, os._exit). Join: SIGTERM, then wait for each, as PyTorch's DataLoader shuts its
// workers down (_shutdown_workers, then multiprocessing's exit handler) before a clean exit.
enum class WorkersAtExit { Leave, Join };

struct TermPolicy {
  enum Kind { Exit, Ignore, Slow } kind = Exit;
  unsigned slow_ms = 0;
};
// "exit", "ignore", "slow:MS" (slow only where allow_slow).
Result<TermPolicy> parse_term_policy(const std::string& text, bool allow_slow);

// What an MPS client does once terminate_client has ended its work: exit (as a program that
// checks its CUDA errors does) or stay alive without GPU memory until signalled.
enum class MpsOnTerminate { Exit, Stay };

struct Options {
  std::string state;  // empty: $GPUSIM_STATE_DIR
  std::vector<AllocSpec> allocs;
  unsigned workers = 0;
  WorkerMode worker_mode = WorkerMode::Survive;
  WorkersAtExit workers_at_exit = WorkersAtExit::Leave;
  TermPolicy on_sigterm;
  TermPolicy workers_on_sigterm;
  bool pidns = false;
  std::optional<std::uint64_t> release_delay_ms;
  bool leak = false;
  bool nvml_client = false;
  bool zombie_child = false;
  unsigned sm_util = 0;
  unsigned mem_util = 0;
  unsigned cpu_percent = 0;  // CPU used beside the GPU (cpu_use.hpp)
  std::optional<std::uint64_t> exit_after_ms;
  std::string name;
  MpsOnTerminate mps_on_terminate = MpsOnTerminate::Exit;
  unsigned mps_server_pid = 0;  // set at run time: the contexts are MPS client contexts of this server
};

// Parses argv. On --help or a usage error, returns the exit status to end with instead.
struct ParseOutcome {
  std::optional<Options> options;
  int exit_status = kExitOk;
};
ParseOutcome parse_options(int argc, char** argv);

}  // namespace gpusim::cuda
