#include "kill/mps_client_ending.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "kill/mps_terminate.hpp"

namespace gpureap {

std::optional<MpsClientLink> find_mps_client(const Snapshot& snapshot, pid_t pid) {
  std::optional<MpsClientLink> link;
  for (const auto& view : snapshot.processes) {
    if (static_cast<pid_t>(view.driver.pid) != pid || view.mps_role != MpsRole::Client) continue;
    if (!link) link = MpsClientLink{pid, std::nullopt, std::nullopt};
    if (!view.mps_server) continue;
    link->server = view.mps_server;
    for (const auto& s : snapshot.processes) {
      if (static_cast<pid_t>(s.driver.pid) == *view.mps_server && s.mps_control_daemon) {
        link->control_daemon = s.mps_control_daemon;
      }
    }
  }
  return link;
}

MpsClientEnding end_mps_client_work(const MpsClientLink& link, bool force, std::chrono::milliseconds timeout,
                                    const std::string& proc_root) {
  MpsTerminateResult ended;
  if (!link.server) {
    ended.detail = "its MPS server was not found (no connection of it to a server the driver lists)";
  } else if (link.control_daemon) {
    ended = terminate_mps_client(*link.control_daemon, *link.server, link.client, proc_root,
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
