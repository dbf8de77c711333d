// MPS roles in a snapshot: which listed compute process is an MPS server, and which server
// each MPS client's work runs in. The tie is the kernel's: a socket the client holds whose
// connected peer is a socket the server holds (sock_diag), never a process name. With it the
// client's identity is proven (the server holds the device files on its behalf) and its
// memory, listed under the client, is the client's and its user's and container's.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "snapshot/snapshot.hpp"

namespace gpureap {

// What the kernel says about the sockets of the listed processes.
struct SocketView {
  std::map<pid_t, std::set<std::uint64_t>> sockets_of;  // pid -> socket inodes it holds
  std::map<std::uint64_t, std::uint64_t> peer_of;       // socket inode -> connected peer's inode
};

// Reads it for the listed processes (nothing when none is an MPS client or named like a
// server); nullopt when the kernel's socket table cannot be read.
std::optional<SocketView> read_socket_view(const Snapshot& snapshot, const std::string& proc_root);

// Sets mps_role, mps_server, mps_control_daemon and mps_clients, and the clients' identity.
void attribute_mps(Snapshot& snapshot, const std::optional<SocketView>& sockets);

}  // namespace gpureap
