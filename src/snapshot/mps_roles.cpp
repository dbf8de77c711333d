#include "snapshot/mps_roles.hpp"

#include <fmt/format.h>

#include "proc/unix_sockets.hpp"

namespace gpureap {

namespace {

std::string argv0_basename(const ProcessInfo& p) {
  if (p.cmdline.empty()) return "";
  const std::string& a = p.cmdline.front();
  auto slash = a.rfind('/');
  return slash == std::string::npos ? a : a.substr(slash + 1);
}

bool is_client(const GpuProcessView& v) { return v.driver.types.mps && v.linux_process != nullptr; }

// A compute process that may be a server: listed as compute, present here, its identity proven.
bool may_serve(const GpuProcessView& v) {
  return v.driver.types.compute && v.linux_process != nullptr && v.identity == Identity::Ok;
}

bool named_server(const GpuProcessView& v) {
  return v.linux_process != nullptr && argv0_basename(*v.linux_process) == "nvidia-cuda-mps-server";
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

std::optional<SocketView> read_socket_view(const Snapshot& snapshot, const std::string& proc_root) {
  bool any = false;
  for (const auto& v : snapshot.processes) any = any || is_client(v) || named_server(v);
  if (!any) return SocketView{};
  auto peers = procfs::unix_socket_peers();
  if (!peers) return std::nullopt;
  SocketView view;
  view.peer_of = std::move(*peers);
  for (const auto& v : snapshot.processes) {
    if (!is_client(v) && !may_serve(v)) continue;
    const auto pid = static_cast<pid_t>(v.driver.pid);
    if (!view.sockets_of.count(pid)) view.sockets_of[pid] = procfs::socket_inodes(proc_root, pid);
  }
  return view;
}

void attribute_mps(Snapshot& snapshot, const std::optional<SocketView>& sockets) {
  // Socket inode -> the candidate server holding it, per GPU.
  std::map<std::pair<unsigned, std::uint64_t>, GpuProcessView*> server_end;
  if (sockets) {
    for (auto& v : snapshot.processes) {
      if (!may_serve(v)) continue;
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
    auto mine = sockets->sockets_of.find(static_cast<pid_t>(v.driver.pid));
    if (mine == sockets->sockets_of.end()) continue;
    for (std::uint64_t ino : mine->second) {
      auto peer = sockets->peer_of.find(ino);
      if (peer == sockets->peer_of.end()) continue;
      auto server = server_end.find({v.gpu_index, peer->second});
      if (server == server_end.end()) continue;
      v.mps_server = static_cast<pid_t>(server->second->driver.pid);
      server->second->mps_role = MpsRole::Server;
      ++server->second->mps_clients;
      break;
    }
    if (v.mps_server) {
      v.identity = Identity::Ok;
      v.identity_reason.clear();
    } else if (v.linux_process->fd_access == FdAccess::Denied) {
      v.identity_reason = fmt::format("MPS client: cannot read /proc/{}/fd to find its MPS server: run as root",
                                      v.driver.pid);
    } else {
      v.identity_reason = "MPS client: no connection of it to a listed MPS server was found";
    }
  }
  for (auto& v : snapshot.processes) {
    if (v.mps_role == MpsRole::None && v.identity == Identity::Ok && named_server(v)) v.mps_role = MpsRole::Server;
    if (v.mps_role != MpsRole::Server) continue;
    const ProcessInfo* parent = snapshot.table.find(v.linux_process->ppid);
    // Only comm is read for every process: both programs' names cut to these 15 bytes, and the
    // parent of a server is the control daemon that started it.
    if (parent != nullptr && parent->comm == "nvidia-cuda-mps") v.mps_control_daemon = parent->pid;
  }
}

}  // namespace gpureap
