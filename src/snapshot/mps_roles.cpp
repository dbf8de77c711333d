#include "snapshot/mps_roles.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>

namespace gpureap {

namespace {

bool is_client(const GpuProcessView& v) { return v.driver.types.mps && v.linux_process != nullptr; }

// A compute process that may be a server: listed as compute, present here, its identity proven.
bool may_serve(const GpuProcessView& v) {
  return v.driver.types.compute && v.linux_process != nullptr && v.identity == Identity::Ok;
}

std::string link_text(int dirfd, const char* name) {
  char target[256];
  const ssize_t n = ::readlinkat(dirfd, name, target, sizeof target);
  return n > 0 && n < static_cast<ssize_t>(sizeof target) ? std::string(target, static_cast<std::size_t>(n)) : "";
}

std::string directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::string_view mps_role_name(MpsRole role) {
  switch (role) {
    case MpsRole::Server: return "server";
    case MpsRole::Client: return "client";
    case MpsRole::None: break;
  }
  return "";
}

std::string root_from_here(const std::string& proc_root, pid_t daemon) {
  const procfs::unique_fd self(::open(fmt::format("{}/self", proc_root).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const procfs::unique_fd theirs(
      ::open(fmt::format("{}/{}", proc_root, daemon).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const std::string ours = self ? link_text(self.get(), "ns/mnt") : "";
  if (!ours.empty() && theirs && link_text(theirs.get(), "ns/mnt") == ours) return "/";
  return fmt::format("{}/{}/root", proc_root, daemon);
}

std::optional<std::string> prove_mps_control_daemon(const procfs::PinnedProcess& daemon,
                                                    const procfs::UnixSocketTable& sockets, std::string& why) {
  const auto status = daemon.status();
  if (!status) {
    why = fmt::format("PID {} has exited", daemon.pid());
    return std::nullopt;
  }
  // A daemon of another user is that user's own: anything of theirs could pose as one.
  if (status->real_uid != 0 || status->effective_uid != 0) {
    why = fmt::format("PID {} runs as uid {}, not root: no MPS control daemon of the host's", daemon.pid(),
                      status->effective_uid);
    return std::nullopt;
  }
  const procfs::unique_fd root = daemon.open_root();
  for (const std::uint64_t ino : daemon.socket_inodes()) {
    const auto it = sockets.find(ino);
    if (it == sockets.end() || !it->second.listening) continue;
    const std::string& path = it->second.bound_path;
    if (path.size() < 2 || path.front() != '/' || path.size() < 8 || path.compare(path.size() - 8, 8, "/control") != 0) {
      continue;
    }
    if (!root) break;
    // The path, seen from the daemon's root, must name this very socket: a file swapped in or
    // a socket re-bound elsewhere proves nothing.
    struct stat file {};
    if (::fstatat(root.get(), path.c_str() + 1, &file, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(file.st_mode) ||
        file.st_dev != it->second.file_dev || file.st_ino != it->second.file_ino) {
      why = fmt::format("PID {} listens at {}, but that path names another file now", daemon.pid(), path);
      continue;
    }
    const std::string dir = directory_of(path);
    return dir;
  }
  if (why.empty()) why = fmt::format("PID {} holds no socket listening at <pipe directory>/control", daemon.pid());
  return std::nullopt;
}

std::optional<SocketView> read_socket_view(const Snapshot& snapshot, const std::string& proc_root) {
  // Candidate daemons: the parents of the listed compute processes. Where the driver lists no
  // MPS client, only a parent called like a control daemon is looked at: the name says where
  // to look (a host without MPS pays nothing), never what a process is.
  bool any_client = false;
  for (const auto& v : snapshot.processes) any_client = any_client || is_client(v);
  std::set<pid_t> parents;
  for (const auto& v : snapshot.processes) {
    if (!may_serve(v) || v.linux_process->ppid <= 1) continue;
    const ProcessInfo* parent = snapshot.table.find(v.linux_process->ppid);
    if (parent != nullptr && (any_client || parent->comm == "nvidia-cuda-mps")) parents.insert(parent->pid);
  }
  if (!any_client && parents.empty()) return SocketView{};
  auto table = procfs::read_unix_sockets();
  if (!table) return std::nullopt;
  SocketView view;
  view.table = std::move(*table);
  auto pinned = [&](pid_t pid) -> std::optional<procfs::PinnedProcess> {
    const ProcessInfo* process = snapshot.table.find(pid);
    std::string why;
    return process != nullptr ? procfs::PinnedProcess::pin(proc_root, pid, process->start_time_ticks, why)
                              : std::nullopt;
  };
  for (const pid_t parent : parents) {
    const auto daemon = pinned(parent);
    std::string why;
    if (!daemon) continue;
    if (auto pipe = prove_mps_control_daemon(*daemon, view.table, why)) {
      view.daemons.push_back(MpsControlDaemon{parent, daemon->start_time_ticks(), std::move(*pipe)});
    }
  }
  auto proven_daemon = [&](pid_t pid) {
    return std::any_of(view.daemons.begin(), view.daemons.end(), [&](const MpsControlDaemon& d) { return d.pid == pid; });
  };
  for (const auto& v : snapshot.processes) {
    const bool server = may_serve(v) && proven_daemon(v.linux_process->ppid);
    if (!server && !is_client(v)) continue;
    const auto pid = static_cast<pid_t>(v.driver.pid);
    if (view.sockets_of.count(pid)) continue;
    const auto process = pinned(pid);
    view.sockets_of[pid] = process ? process->socket_inodes() : std::set<std::uint64_t>{};
  }
  return view;
}

void attribute_mps(Snapshot& snapshot, std::optional<SocketView> sockets) {
  if (sockets) snapshot.mps_daemons = sockets->daemons;
  // Servers: listed compute processes whose parent is a proven control daemon.
  for (auto& v : snapshot.processes) {
    if (!may_serve(v) || snapshot.mps_daemon(v.linux_process->ppid) == nullptr) continue;
    v.mps_role = MpsRole::Server;
    v.mps_control_daemon = v.linux_process->ppid;
  }
  // Socket inode -> the server holding it, per GPU.
  std::map<std::pair<unsigned, std::uint64_t>, GpuProcessView*> server_end;
  if (sockets) {
    for (auto& v : snapshot.processes) {
      if (v.mps_role != MpsRole::Server) continue;
      auto it = sockets->sockets_of.find(static_cast<pid_t>(v.driver.pid));
      if (it == sockets->sockets_of.end()) continue;
      for (std::uint64_t ino : it->second) server_end[{v.gpu_index, ino}] = &v;
    }
  }
  for (auto& v : snapshot.processes) {
    if (!is_client(v)) continue;
    v.mps_role = MpsRole::Client;
    if (!sockets) {
      v.identity_reason = "MPS client: cannot read the kernel's socket table to find its MPS server";
      continue;
    }
    // Every proven server that holds the peer of one of its sockets: exactly one is its server.
    std::vector<GpuProcessView*> connected;
    if (auto mine = sockets->sockets_of.find(static_cast<pid_t>(v.driver.pid)); mine != sockets->sockets_of.end()) {
      for (std::uint64_t peer : procfs::peers_of(sockets->table, mine->second)) {
        auto server = server_end.find({v.gpu_index, peer});
        if (server != server_end.end() &&
            std::find(connected.begin(), connected.end(), server->second) == connected.end()) {
          connected.push_back(server->second);
        }
      }
    }
    if (connected.size() == 1) {
      v.mps_server = static_cast<pid_t>(connected.front()->driver.pid);
      ++connected.front()->mps_clients;
      v.identity = Identity::Ok;
      v.identity_reason.clear();
    } else if (connected.size() > 1) {
      std::string list;
      for (const auto* s : connected) list += fmt::format("{}{}", list.empty() ? "" : ", ", s->driver.pid);
      v.identity_reason = fmt::format("MPS client: connected to several MPS servers ({}): which one runs its work is "
                                      "not proven",
                                      list);
    } else if (v.linux_process->fd_access == FdAccess::Denied) {
      v.identity_reason = fmt::format("MPS client: cannot read /proc/{}/fd to find its MPS server: run as root",
                                      v.driver.pid);
    } else {
      v.identity_reason = "MPS client: no connection of it to a proven MPS server (a listed process started by a "
                          "control daemon of root's) was found";
    }
  }
}

}  // namespace gpureap
