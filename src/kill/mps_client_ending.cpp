#include "kill/mps_client_ending.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "kill/mps_terminate.hpp"

namespace gpureap {

std::optional<MpsClientLink> find_mps_client(const Snapshot& snapshot, pid_t pid) {
  std::optional<MpsClientLink> link;
  for (const auto& view : snapshot.processes) {
    if (static_cast<pid_t>(view.driver.pid) != pid || view.mps_role != MpsRole::Client) continue;
    if (!link) {
      link = MpsClientLink{};
      link->client = pid;
      if (view.linux_process != nullptr) link->client_start_ticks = view.linux_process->start_time_ticks;
    }
    if (!view.mps_server) continue;
    link->server = view.mps_server;
    for (const auto& s : snapshot.processes) {
      if (static_cast<pid_t>(s.driver.pid) != *view.mps_server || !s.mps_control_daemon || s.linux_process == nullptr) {
        continue;
      }
      link->server_start_ticks = s.linux_process->start_time_ticks;
      if (const MpsControlDaemon* daemon = snapshot.mps_daemon(*s.mps_control_daemon)) link->control_daemon = *daemon;
    }
  }
  return link;
}

std::vector<pid_t> mps_clients_served_by(const Snapshot& snapshot, pid_t pid, bool with_unproven) {
  std::vector<pid_t> servers_of_daemon;
  for (const auto& v : snapshot.processes) {
    if (v.mps_role == MpsRole::Server && v.mps_control_daemon == pid) servers_of_daemon.push_back(static_cast<pid_t>(v.driver.pid));
  }
  std::vector<pid_t> clients;
  for (const auto& v : snapshot.processes) {
    if (v.mps_role != MpsRole::Client) continue;
    const bool served = v.mps_server ? (*v.mps_server == pid || std::find(servers_of_daemon.begin(),
                                                                           servers_of_daemon.end(),
                                                                           *v.mps_server) != servers_of_daemon.end())
                                     : with_unproven;
    const auto client = static_cast<pid_t>(v.driver.pid);
    if (served && std::find(clients.begin(), clients.end(), client) == clients.end()) clients.push_back(client);
  }
  return clients;
}

std::string pids_with_users(const Snapshot& snapshot, const std::vector<pid_t>& pids) {
  std::string list;
  for (pid_t pid : pids) {
    const ProcessInfo* process = snapshot.table.find(pid);
    list += fmt::format("{}{} ({})", list.empty() ? "" : ", ", pid, process != nullptr ? process->user : std::string("?"));
  }
  return list;
}

MpsClientEnding end_mps_client_work(const MpsClientLink& link, bool force, std::chrono::milliseconds timeout,
                                    const std::string& proc_root) {
  MpsTerminateResult ended;
  if (!link.server) {
    ended.detail = "its MPS server is not proven (no connection of it to a listed server that a proven control daemon started)";
  } else if (link.control_daemon) {
    ended = terminate_mps_client(*link.control_daemon, PinTarget{*link.server, link.server_start_ticks},
                                 PinTarget{link.client, link.client_start_ticks}, proc_root,
                                 std::max(timeout, std::chrono::milliseconds(1000)));
  } else {
    ended.detail = fmt::format("the control daemon of MPS server {} was not found", *link.server);
  }
  MpsClientEnding ending;
  if (ended.ok) {
    ending.may_signal = true;
    ending.note = fmt::format("PID {}: {}", link.client, ended.detail);
    return ending;
  }
  const std::string server = link.server ? std::to_string(*link.server) : std::string("<server>");
  if (force) {
    ending.may_signal = true;
    ending.note = fmt::format("PID {}: {}; signalled anyway (--force): MPS server {} and its other clients may be "
                              "left faulted",
                              link.client, ended.detail, server);
    return ending;
  }
  ending.refusal = fmt::format(
      "not signalled: {}; signalling an MPS client with work outstanding faults its MPS server and every other "
      "client of it. End it with `echo terminate_client {} {} | nvidia-cuda-mps-control`",
      ended.detail, server, link.client);
  return ending;
}

}  // namespace gpureap
