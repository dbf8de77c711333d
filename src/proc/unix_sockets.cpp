#include "proc/unix_sockets.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string_view>
#include <vector>

#include "proc/proc_io.hpp"

namespace gpureap::procfs {

namespace {

// The peer attribute of one unix_diag answer, if it has one.
std::optional<std::uint32_t> peer_of(const nlmsghdr* h) {
  const auto* msg = static_cast<const unix_diag_msg*>(NLMSG_DATA(h));
  const std::size_t header = NLMSG_LENGTH(sizeof(unix_diag_msg));
  if (h->nlmsg_len < header) return std::nullopt;
  std::size_t left = h->nlmsg_len - NLMSG_ALIGN(header);
  const auto* attr = reinterpret_cast<const rtattr*>(reinterpret_cast<const char*>(msg) + NLMSG_ALIGN(sizeof *msg));
  for (; RTA_OK(attr, left); attr = RTA_NEXT(attr, left)) {
    if (attr->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(attr) >= sizeof(std::uint32_t)) {
      std::uint32_t peer;
      std::memcpy(&peer, RTA_DATA(attr), sizeof peer);
      return peer;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::map<std::uint64_t, std::uint64_t>> unix_socket_peers(std::size_t max_sockets) {
  unique_fd sock(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (sock.get() < 0) return std::nullopt;
  // A dump that stops answering must not hang the caller.
  timeval timeout{2, 0};
  ::setsockopt(sock.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  struct {
    nlmsghdr header;
    unix_diag_req request;
  } req{};
  req.header.nlmsg_len = sizeof req;
  req.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.request.sdiag_family = AF_UNIX;
  req.request.udiag_states = ~0u;
  req.request.udiag_show = UDIAG_SHOW_PEER;
  if (::send(sock.get(), &req, sizeof req, 0) != static_cast<ssize_t>(sizeof req)) return std::nullopt;

  std::map<std::uint64_t, std::uint64_t> peers;
  std::vector<char> buf(32 * 1024);
  for (;;) {
    ssize_t n = ::recv(sock.get(), buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    auto left = static_cast<unsigned>(n);
    for (auto* h = reinterpret_cast<const nlmsghdr*>(buf.data()); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
      if (h->nlmsg_type == NLMSG_DONE) return peers;
      if (h->nlmsg_type == NLMSG_ERROR) return std::nullopt;
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
      const auto* msg = static_cast<const unix_diag_msg*>(NLMSG_DATA(h));
      if (auto peer = peer_of(h); peer && *peer != 0 && peers.size() < max_sockets) peers[msg->udiag_ino] = *peer;
    }
  }
}

std::set<std::uint64_t> socket_inodes(const std::string& proc_root, pid_t pid) {
  std::set<std::uint64_t> out;
  std::string dir = proc_root + "/" + std::to_string(pid) + "/fd";
  unique_fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() < 0) return out;
  DIR* d = ::fdopendir(dfd.get());
  if (d == nullptr) return out;
  (void)dfd.release();  // owned by d now
  constexpr std::string_view kPrefix = "socket:[";
  std::size_t seen = 0;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.' || ++seen > 65536) continue;
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
