// Which AF_UNIX sockets exist, which listen at which path and which are connected to which:
// the kernel's own answer (sock_diag), so that a connection between two processes, or the
// process serving a socket path, is proven without trusting any name. Used to prove an MPS
// control daemon (the holder of the socket listening at <pipe>/control) and to tie an MPS
// client to the server it talks to.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <sys/types.h>

namespace gpureap::procfs {

struct UnixSocket {
  std::uint64_t peer = 0;      // the connected peer's inode; 0 when not connected
  bool listening = false;      // TCP_LISTEN: a server socket
  std::string bound_path;      // the path it was bound to ("" when unbound or abstract)
  // The socket file's identity at bind time (UNIX_DIAG_VFS), to check that the path still
  // names this socket: 0 when unbound.
  std::uint64_t file_dev = 0;
  std::uint64_t file_ino = 0;
};

// Every AF_UNIX socket of this network namespace, by socket inode (NETLINK_SOCK_DIAG, with
// UDIAG_SHOW_PEER | UDIAG_SHOW_NAME | UDIAG_SHOW_VFS). nullopt when the kernel refuses or
// stops answering (2 s). Bounded: at most `max_sockets` are kept (a host with more is
// answered in part).
using UnixSocketTable = std::map<std::uint64_t, UnixSocket>;
std::optional<UnixSocketTable> read_unix_sockets(std::size_t max_sockets = 1 << 20);

// The connected peers of `sockets` (their inodes), as `table` says.
std::set<std::uint64_t> peers_of(const UnixSocketTable& table, const std::set<std::uint64_t>& sockets);

// The socket inodes among the links of the fd directory `fd_dir` ("socket:[N]").
std::set<std::uint64_t> socket_inodes_in(int fd_dir);

}  // namespace gpureap::procfs
