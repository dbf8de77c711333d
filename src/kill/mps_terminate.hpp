// Ending an MPS client the way NVIDIA supports: the control daemon's `terminate_client
// <server> <client>`, which ends the client's outstanding GPU work inside its server. A client
// signalled while its work is outstanding faults the server and every other client of it, so
// the ladder reaches a client only after this succeeded (or with --force).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <sys/types.h>

namespace gpureap {

// A control daemon gpureap may talk to: its own nvidia-cuda-mps-control (root's, writable by
// nobody else) and its pipe directory (from its environment, proven by the pid file there).
struct MpsControl {
  pid_t daemon = 0;
  std::string program;
  std::string pipe_dir;
};
// nullopt with the reason in `why` when it cannot be found or trusted.
std::optional<MpsControl> find_mps_control(pid_t daemon, const std::string& proc_root, std::string& why);

// One command through the front-end; its answer (stdout and stderr), nullopt with `why` when
// it did not run or failed.
std::optional<std::string> mps_command(const MpsControl& control, const std::string& line,
                                       std::chrono::milliseconds timeout, std::string& why);

struct MpsTerminateResult {
  bool ok = false;
  std::string detail;  // one line for a person: what was done, or why it could not be
};

// Asks control daemon `daemon` (whose pipe directory is found in its environment and proven
// by the pid file there) to end `client` on `server`, through the daemon's own
// nvidia-cuda-mps-control when that file and its directory belong to root and are writable by
// nobody else; then waits up to `timeout` for the client to leave the server's client list.
MpsTerminateResult terminate_mps_client(pid_t daemon, pid_t server, pid_t client, const std::string& proc_root,
                                        std::chrono::milliseconds timeout);

}  // namespace gpureap
