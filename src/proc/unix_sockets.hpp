// Which AF_UNIX sockets are connected to which: the kernel's own answer (sock_diag), so that a
// connection between two processes can be proven without trusting any name. Used to tie an
// MPS client to the MPS server it talks to.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <sys/types.h>

namespace gpureap::procfs {

// Socket inode -> the inode of its connected peer, for every connected AF_UNIX socket of this
// network namespace (NETLINK_SOCK_DIAG, UDIAG_SHOW_PEER). nullopt when the kernel refuses.
// Bounded: at most `max_sockets` entries are kept (a host with more is answered in part).
std::optional<std::map<std::uint64_t, std::uint64_t>> unix_socket_peers(std::size_t max_sockets = 1 << 20);

// The socket inodes among <proc_root>/<pid>/fd's links ("socket:[N]"); empty when unreadable.
std::set<std::uint64_t> socket_inodes(const std::string& proc_root, pid_t pid);

}  // namespace gpureap::procfs
