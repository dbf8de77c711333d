// MPS roles in a snapshot, from kernel facts alone (no name, pid file or environment, which
// any user can write):
// - a control daemon is a root process holding the socket that listens at <pipe>/control,
//   that path still naming that very socket (sock_diag's bound name and file inode);
// - a server is a compute process the driver lists whose parent is such a daemon;
// - a client is a process the driver lists as an MPS client, tied to the one proven server
//   that holds the connected peer of one of its sockets (sock_diag's peer).
// Without that proof a process has no MPS role: no protection, no refusal, no special path.
// With it the client's identity is proven (the server holds the device files on its behalf)
// and its memory, listed under the client, is the client's and its user's and container's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "proc/pinned_process.hpp"
#include "proc/unix_sockets.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

// The pipe directory that proves `daemon` an MPS control daemon: it runs as root, a socket it
// holds listens at the absolute path <pipe>/control, and that path (seen from the daemon's own
// root) names that socket. The directory's mode proves nothing either way: NVIDIA's daemon makes
// it 0777. nullopt with the reason in `why` otherwise.
std::optional<std::string> prove_mps_control_daemon(const procfs::PinnedProcess& daemon,
                                                    const procfs::UnixSocketTable& sockets, std::string& why);

// Where this process reaches the daemon's root directory: "/" when the daemon shares our mount
// namespace, else its /proc/<pid>/root.
std::string root_from_here(const std::string& proc_root, pid_t daemon);

// What the kernel says about the sockets of the processes whose roles are proven.
struct SocketView {
  procfs::UnixSocketTable table;
  std::map<pid_t, std::set<std::uint64_t>> sockets_of;  // read through each one's pinned /proc dir
  std::vector<MpsControlDaemon> daemons;
};

// Reads it for the listed processes: nothing when the driver lists no MPS client and no
// listed process's parent is called like a control daemon (a name only says where to look);
// nullopt when the kernel's socket table cannot be read.
std::optional<SocketView> read_socket_view(const Snapshot& snapshot, const std::string& proc_root);

// Sets mps_daemons, mps_role, mps_server, mps_control_daemon and mps_clients, and the clients'
// identity.
void attribute_mps(Snapshot& snapshot, std::optional<SocketView> sockets);

}  // namespace gpureap
