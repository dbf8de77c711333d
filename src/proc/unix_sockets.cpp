#include "proc/unix_sockets.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <charconv>
#include <cstring>
#include <string_view>
#include <vector>

#include "proc/proc_io.hpp"

namespace gpureap::procfs {

namespace {

std::uint64_t device_number(std::uint32_t kernel_dev) {
  // The kernel's own dev_t (the superblock's s_dev: 12 bits of major above 20 of minor), as
  // stat's st_dev reports it.
  return makedev(kernel_dev >> 20, kernel_dev & 0xfffffu);
}

void read_attributes(const nlmsghdr* h, UnixSocket& socket) {
  const auto* msg = static_cast<const unix_diag_msg*>(NLMSG_DATA(h));
  const std::size_t header = NLMSG_LENGTH(sizeof(unix_diag_msg));
  if (h->nlmsg_len < header) return;
  std::size_t left = h->nlmsg_len - NLMSG_ALIGN(header);
  const auto* attr = reinterpret_cast<const rtattr*>(reinterpret_cast<const char*>(msg) + NLMSG_ALIGN(sizeof *msg));
  for (; RTA_OK(attr, left); attr = RTA_NEXT(attr, left)) {
    const std::size_t size = RTA_PAYLOAD(attr);
    if (attr->rta_type == UNIX_DIAG_PEER && size >= sizeof(std::uint32_t)) {
      std::uint32_t peer;
      std::memcpy(&peer, RTA_DATA(attr), sizeof peer);
      socket.peer = peer;
    } else if (attr->rta_type == UNIX_DIAG_NAME && size > 0) {
      const char* name = static_cast<const char*>(RTA_DATA(attr));
      // An abstract name starts with a NUL byte: it is no path.
      if (name[0] != '\0') socket.bound_path.assign(name, strnlen(name, size));
    } else if (attr->rta_type == UNIX_DIAG_VFS && size >= sizeof(unix_diag_vfs)) {
      unix_diag_vfs vfs;
      std::memcpy(&vfs, RTA_DATA(attr), sizeof vfs);
      socket.file_dev = device_number(vfs.udiag_vfs_dev);
      socket.file_ino = vfs.udiag_vfs_ino;
    }
  }
}

}  // namespace

std::optional<UnixSocketTable> read_unix_sockets(std::size_t max_sockets) {
  unique_fd sock(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (sock.get() < 0) return std::nullopt;
  // A dump that stops answering must not hang the caller: one absolute deadline for it all.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  struct {
    nlmsghdr header;
    unix_diag_req request;
  } req{};
  req.header.nlmsg_len = sizeof req;
  req.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.request.sdiag_family = AF_UNIX;
  req.request.udiag_states = ~0u;
  req.request.udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_NAME | UDIAG_SHOW_VFS;
  if (::send(sock.get(), &req, sizeof req, 0) != static_cast<ssize_t>(sizeof req)) return std::nullopt;

  UnixSocketTable table;
  std::vector<char> buf(32 * 1024);
  for (;;) {
    const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd ready{sock.get(), POLLIN, 0};
    if (left_ms <= 0 || ::poll(&ready, 1, static_cast<int>(left_ms)) <= 0) return std::nullopt;
    ssize_t n = ::recv(sock.get(), buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return std::nullopt;
    auto left = static_cast<unsigned>(n);
    for (auto* h = reinterpret_cast<const nlmsghdr*>(buf.data()); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_DONE) return table;
      if (h->nlmsg_type == NLMSG_ERROR) return std::nullopt;
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || table.size() >= max_sockets) continue;
      const auto* msg = static_cast<const unix_diag_msg*>(NLMSG_DATA(h));
      UnixSocket socket;
      socket.listening = msg->udiag_state == TCP_LISTEN;
      read_attributes(h, socket);
      table[msg->udiag_ino] = std::move(socket);
    }
  }
}

std::set<std::uint64_t> peers_of(const UnixSocketTable& table, const std::set<std::uint64_t>& sockets) {
  std::set<std::uint64_t> peers;
  for (const std::uint64_t ino : sockets) {
    const auto it = table.find(ino);
    if (it != table.end() && it->second.peer != 0) peers.insert(it->second.peer);
  }
  return peers;
}

std::set<std::uint64_t> socket_inodes_in(int fd_dir) {
  std::set<std::uint64_t> out;
  const int copy = ::fcntl(fd_dir, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return out;
  DIR* d = ::fdopendir(copy);
  if (d == nullptr) {
    ::close(copy);
    return out;
  }
  ::rewinddir(d);
  constexpr std::string_view kPrefix = "socket:[";
  std::size_t seen = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (++seen > 65536) break;
    char target[64];
    ssize_t n = ::readlinkat(::dirfd(d), e->d_name, target, sizeof target);
    if (n <= 0 || n >= static_cast<ssize_t>(sizeof target)) continue;
    std::string_view t(target, static_cast<std::size_t>(n));
    if (t.substr(0, kPrefix.size()) != kPrefix || t.back() != ']') continue;
    std::uint64_t ino = 0;
    auto digits = t.substr(kPrefix.size(), t.size() - kPrefix.size() - 1);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), ino);
    if (ec == std::errc() && p == digits.data() + digits.size()) out.insert(ino);
  }
  ::closedir(d);
  return out;
}

}  // namespace gpureap::procfs
