// Ending an MPS client before any signal reaches it, shared by every command that ends
// processes (kill, reap, watch, run): the client's server and control daemon as one snapshot
// proved them, then terminate_client through that daemon. A client signalled with its work
// outstanding faults its server and every other client of it, so without terminate_client the
// client is not signalled unless the person forced it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "snapshot/snapshot.hpp"

namespace gpureap {

// An MPS client and what ending it needs, as the snapshot proved them (kernel socket table).
struct MpsClientLink {
  pid_t client = 0;
  std::uint64_t client_start_ticks = 0;
  std::optional<pid_t> server;  // nullopt: no connection of it to a proven server
  std::uint64_t server_start_ticks = 0;
  std::optional<MpsControlDaemon> control_daemon;  // the proven daemon that started the server
};

// nullopt when the driver does not list pid as an MPS client in this snapshot.
std::optional<MpsClientLink> find_mps_client(const Snapshot& snapshot, pid_t pid);

struct MpsClientEnding {
  bool may_signal = false;  // its work was ended, or --force: the ladder may go on
  std::string note;         // for the report's notes when may_signal ("PID N: ...")
  std::string refusal;      // why it was not signalled and what to do instead, when !may_signal
};

// The MPS clients that `pid` serves, as `snapshot` proved them (kernel socket table), once each
// in the snapshot's order: those connected to it as their server, and those whose server it is
// the control daemon of. With `with_unproven`, also every client whose server was not found: it
// may be one of them.
std::vector<pid_t> mps_clients_served_by(const Snapshot& snapshot, pid_t pid, bool with_unproven);

// "PID (user), PID (user)" for a refusal that names the clients an ending would cut off.
std::string pids_with_users(const Snapshot& snapshot, const std::vector<pid_t>& pids);

// terminate_client for `link`, waiting up to `timeout` (at least 1 s) for the server to let it go.
MpsClientEnding end_mps_client_work(const MpsClientLink& link, bool force, std::chrono::milliseconds timeout,
                                    const std::string& proc_root);

}  // namespace gpureap
