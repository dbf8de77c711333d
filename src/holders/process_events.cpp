#include "holders/process_events.hpp"

#include <linux/cn_proc.h>
#include <linux/filter.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

namespace gpureap::holders {
namespace {

// Where a connector datagram's fields are: the netlink header, cn_msg, then proc_event.
constexpr std::uint32_t kEventAt = NLMSG_HDRLEN + sizeof(cn_msg);
constexpr std::uint32_t kWhatAt = kEventAt + offsetof(proc_event, what);
constexpr std::uint32_t kDataAt = kEventAt + offsetof(proc_event, event_data);
static_assert(kWhatAt == 36 && kDataAt == 52, "the connector's layout since Linux 2.6.15");

// A BPF word load reads the packet big-endian: what it compares with is turned so too.
constexpr std::uint32_t loaded(std::uint32_t host) {
  return std::endian::native == std::endian::big ? host : __builtin_bswap32(host);
}

// A socket filter that lets through only what read_datagram keeps: forks of a new process
// (not a thread), exits of a whole process, execs and uid/gid changes. A host's threads
// starting and ending, comm, sid and ptrace changes then wake no reader. Equal PIDs compare
// equal in either byte order.
void attach_filter(int fd) {
  using Data = decltype(proc_event::event_data);
  constexpr auto kFork = offsetof(Data, fork);
  constexpr auto kExit = offsetof(Data, exit);
  sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kWhatAt),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, loaded(proc_event::PROC_EVENT_FORK), 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, loaded(proc_event::PROC_EVENT_EXIT), 7, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, loaded(proc_event::PROC_EVENT_EXEC), 11, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, loaded(proc_event::PROC_EVENT_UID), 10, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, loaded(proc_event::PROC_EVENT_GID), 9, 8),
      // fork: the child is a process when its PID is its thread group's
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kDataAt + kFork + offsetof(Data::fork_proc_event, child_pid)),
      BPF_STMT(BPF_MISC | BPF_TAX, 0),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kDataAt + kFork + offsetof(Data::fork_proc_event, child_tgid)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_X, 0, 5, 4),
      // exit: the same of the one that ended
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kDataAt + kExit + offsetof(Data::exit_proc_event, process_pid)),
      BPF_STMT(BPF_MISC | BPF_TAX, 0),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kDataAt + kExit + offsetof(Data::exit_proc_event, process_tgid)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_X, 0, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, 0),           // dropped
      BPF_STMT(BPF_RET | BPF_K, 0xffffffff),  // kept whole
  };
  const sock_fprog program{static_cast<unsigned short>(sizeof code / sizeof code[0]), code};
  setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program);
}

}  // namespace

std::optional<ProcessEvents> ProcessEvents::open(std::string* why) {
  ProcessEvents events;
  events.fd_ = procfs::unique_fd(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR));
  auto fail = [why](const char* step) -> std::optional<ProcessEvents> {
    if (why) *why = fmt::format("process events connector: {}: {}", step, std::strerror(errno));
    return std::nullopt;
  };
  if (!events.fd_) return fail("socket");
  sockaddr_nl address{};
  address.nl_family = AF_NETLINK;
  address.nl_groups = CN_IDX_PROC;
  address.nl_pid = 0;  // the kernel picks a port id
  if (bind(events.fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return fail("bind");
  // Best effort: without the filter the same events are dropped here instead (read_datagram).
  attach_filter(events.fd_.get());
  // A larger receive buffer: every process on the host reports its forks and exits here.
  const int buffer = 4 << 20;
  setsockopt(events.fd_.get(), SOL_SOCKET, SO_RCVBUFFORCE, &buffer, sizeof buffer);

  // nlmsghdr, then cn_msg, then the operation: cn_msg ends in a flexible array, so the
  // request is laid out in a byte buffer.
  constexpr std::size_t kPayload = sizeof(cn_msg) + sizeof(proc_cn_mcast_op);
  alignas(nlmsghdr) unsigned char request[NLMSG_SPACE(kPayload)] = {};
  auto* header = reinterpret_cast<nlmsghdr*>(request);
  header->nlmsg_len = static_cast<__u32>(NLMSG_LENGTH(kPayload));
  header->nlmsg_type = NLMSG_DONE;
  auto* message = static_cast<cn_msg*>(NLMSG_DATA(header));
  message->id.idx = CN_IDX_PROC;
  message->id.val = CN_VAL_PROC;
  message->len = sizeof(proc_cn_mcast_op);
  const proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
  std::memcpy(message->data, &op, sizeof op);
  if (send(events.fd_.get(), request, header->nlmsg_len, 0) != static_cast<ssize_t>(header->nlmsg_len)) {
    return fail("listen");
  }
  return events;
}

namespace {
constexpr std::size_t kEventPrefix = 32;
}  // namespace

void ProcessEvents::drain(ProcessEventBatch& batch) {
  // Every process on the host sends its forks and exits here, one datagram each: they are
  // taken kBatch at a time (one system call), not one a call.
  constexpr unsigned kBatch = 64;
  constexpr std::size_t kDatagram = 1024;  // an event is about 80 bytes
  if (buffers_.empty()) buffers_.resize(kBatch * kDatagram);
  iovec parts[kBatch];
  mmsghdr messages[kBatch];
  for (unsigned i = 0; i < kBatch; ++i) {
    parts[i] = iovec{buffers_.data() + i * kDatagram, kDatagram};
    messages[i] = mmsghdr{};
    messages[i].msg_hdr.msg_iov = &parts[i];
    messages[i].msg_hdr.msg_iovlen = 1;
  }
  while (true) {
    const int received = recvmmsg(fd_.get(), messages, kBatch, 0, nullptr);
    if (received < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        batch.lost = true;
        continue;
      }
      return;  // EAGAIN: nothing more queued
    }
    if (received == 0) return;
    for (int i = 0; i < received; ++i) {
      // A datagram cut short may have been a fork: as good as lost.
      if ((messages[i].msg_hdr.msg_flags & MSG_TRUNC) != 0) batch.lost = true;
      read_datagram(buffers_.data() + static_cast<std::size_t>(i) * kDatagram, messages[i].msg_len, batch);
    }
    // Again until EAGAIN, not only while batches come full: an overflow that followed these
    // datagrams is reported by the next call.
  }
}

void ProcessEvents::read_datagram(const char* buffer, std::size_t n, ProcessEventBatch& batch) {
  // The netlink messages in the datagram, each aligned to NLMSG_ALIGNTO.
  for (std::size_t offset = 0; offset + sizeof(nlmsghdr) <= n;) {
    const auto* header = reinterpret_cast<const nlmsghdr*>(buffer + offset);
    if (header->nlmsg_len < sizeof(nlmsghdr) || offset + header->nlmsg_len > n) break;
    offset += NLMSG_ALIGN(header->nlmsg_len);
    if (header->nlmsg_type == NLMSG_ERROR || header->nlmsg_type == NLMSG_NOOP) continue;
    // The kernel's proc_event may be shorter or longer than these headers' (fields were added
    // over the years): what we read (what, the PIDs, the exit code) is in the first 32 bytes.
    if (header->nlmsg_len < NLMSG_LENGTH(sizeof(cn_msg) + kEventPrefix)) continue;
    const auto* message = reinterpret_cast<const cn_msg*>(reinterpret_cast<const char*>(header) + NLMSG_HDRLEN);
    if (message->id.idx != CN_IDX_PROC || message->id.val != CN_VAL_PROC) continue;
    if (message->len < kEventPrefix || NLMSG_HDRLEN + sizeof(cn_msg) + message->len > header->nlmsg_len) continue;
    proc_event event{};
    std::memcpy(&event, message->data, std::min<std::size_t>(message->len, sizeof event));
    if (event.what == proc_event::PROC_EVENT_EXIT) {
      const auto& exit = event.event_data.exit;
      if (exit.process_pid == exit.process_tgid) {
        batch.exits.push_back(ProcessExit{exit.process_pid, static_cast<int>(exit.exit_code)});
      }
    } else if (event.what == proc_event::PROC_EVENT_FORK) {
      const auto& fork = event.event_data.fork;
      if (fork.child_pid == fork.child_tgid) batch.forks.push_back(ProcessFork{fork.child_pid, fork.parent_tgid});
    } else if (event.what == proc_event::PROC_EVENT_EXEC) {
      batch.execs.push_back(event.event_data.exec.process_tgid);
    } else if (event.what == proc_event::PROC_EVENT_UID || event.what == proc_event::PROC_EVENT_GID) {
      batch.credentials.push_back(event.event_data.id.process_tgid);
    }
  }
}

}  // namespace gpureap::holders
