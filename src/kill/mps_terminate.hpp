// Ending an MPS client the way NVIDIA supports: the control daemon's `terminate_client
// <server> <client>`, which ends the client's outstanding GPU work inside its server. A client
// signalled while its work is outstanding faults the server and every other client of it, so
// the ladder reaches a client only after this succeeded (or with --force).
//
// The front end is the very file the proven daemon runs (opened through its pinned /proc
// directory, root's and writable by nobody else), run with the daemon's credentials. Success
// is the server letting the client go within the deadline (its connection to the server
// closes, or the server's client list no longer names it), whatever the reply says: what a
// successful terminate_client prints is not documented.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <sys/types.h>

#include "snapshot/snapshot.hpp"

namespace gpureap {

struct MpsTerminateResult {
  bool ok = false;
  std::string detail;  // one line for a person: what was done, or why it could not be
};

// A process as the snapshot saw it, to be pinned again before anything is asked about it.
struct PinTarget {
  pid_t pid = 0;
  std::uint64_t start_time_ticks = 0;
};

// Asks the proven control daemon `daemon` (pinned again and proven again by its socket) to end
// `client` on `server` (which the daemon must list as its own), then waits up to `timeout` for
// the server to let it go.
MpsTerminateResult terminate_mps_client(const MpsControlDaemon& daemon, const PinTarget& server,
                                        const PinTarget& client, const std::string& proc_root,
                                        std::chrono::milliseconds timeout);

}  // namespace gpureap
