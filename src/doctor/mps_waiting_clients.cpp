// NVIDIA MPS: CUDA programs stuck waiting for another user's server. A control daemon runs one
// server at a time; a client of another UID waits, its connection held by the daemon, until
// every client of the current server has exited (NVIDIA's MPS documentation). The tie is the
// kernel's socket table: a process whose socket's connected peer the daemon holds, still there
// a moment later (a front-end command's connection lasts milliseconds), of a UID other than
// the server's. Nothing here signals anything or runs any program.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "accounts/user_names.hpp"
#include "doctor/doctor.hpp"
#include "proc/pinned_process.hpp"
#include "proc/unix_sockets.hpp"

namespace gpureap {
namespace {

// How long a connection to the daemon must last to count as a waiting client.
constexpr std::chrono::milliseconds kSettle{200};

struct Waiter {
  pid_t pid = 0;
  uid_t uid = 0;
  std::string user;
  std::string comm;  // raw: the renderer sanitises it
  std::uint64_t socket = 0;
};

// The peers of the daemon's sockets other than its server's end: who is connected to it now.
std::set<std::uint64_t> connected_to_daemon(const procfs::UnixSocketTable& table,
                                            const std::set<std::uint64_t>& daemon_sockets,
                                            const std::set<std::uint64_t>& server_sockets) {
  auto peers = procfs::peers_of(table, daemon_sockets);
  std::erase_if(peers, [&](std::uint64_t peer) { return server_sockets.count(peer) > 0; });
  return peers;
}

// The identity of the file a pinned process runs, or nullopt.
std::optional<std::pair<dev_t, ino_t>> executable_of(const procfs::PinnedProcess& process) {
  const procfs::unique_fd exe = process.open_executable();
  struct stat file {};
  if (!exe || ::fstat(exe.get(), &file) != 0) return std::nullopt;
  return std::make_pair(file.st_dev, file.st_ino);
}

// Processes of another UID than the server's that hold a connection to the daemon for longer
// than a command takes. The daemon's own program (its front end) is left out. Every process is
// read through its pinned /proc directory, the start time the snapshot saw checked.
std::vector<Waiter> waiting_clients(const Snapshot& snapshot, const MpsControlDaemon& daemon,
                                    const GpuProcessView& server, UserNames& users) {
  const std::string& proc_root = snapshot.table.options().proc_root;
  std::string why;
  const auto pinned_daemon = procfs::PinnedProcess::pin(proc_root, daemon.pid, daemon.start_time_ticks, why);
  const auto pinned_server = procfs::PinnedProcess::pin(proc_root, static_cast<pid_t>(server.driver.pid),
                                                       server.linux_process->start_time_ticks, why);
  auto table = procfs::read_unix_sockets();
  if (!pinned_daemon || !pinned_server || !table) return {};
  const auto server_sockets = pinned_server->socket_inodes();
  const auto wanted = connected_to_daemon(*table, pinned_daemon->socket_inodes(), server_sockets);
  if (wanted.empty()) return {};
  const auto front_end = executable_of(*pinned_daemon);
  const uid_t server_uid = server.linux_process->uid;
  std::vector<Waiter> found;
  for (const auto& [pid, info] : snapshot.table.processes()) {
    if (pid == daemon.pid || pid == static_cast<pid_t>(server.driver.pid)) continue;
    const auto process = procfs::PinnedProcess::pin(proc_root, pid, info.start_time_ticks, why);
    if (!process) continue;
    for (const std::uint64_t ino : process->socket_inodes()) {
      if (!wanted.count(ino)) continue;
      const auto status = process->status();
      if (!status || status->effective_uid == server_uid) break;
      if (front_end && executable_of(*process) == front_end) break;
      found.push_back(Waiter{pid, status->effective_uid, users.name(status->effective_uid), status->name, ino});
      break;
    }
  }
  if (found.empty()) return found;
  std::this_thread::sleep_for(kSettle);
  table = procfs::read_unix_sockets();
  if (!table || !pinned_daemon->still_there()) return {};
  const auto still = connected_to_daemon(*table, pinned_daemon->socket_inodes(), server_sockets);
  std::erase_if(found, [&](const Waiter& w) { return !still.count(w.socket); });
  return found;
}

void report_waiting(const GpuProcessView& server, const std::vector<pid_t>& clients, const std::vector<Waiter>& waiting,
                    Diagnosis& diagnosis) {
  const pid_t pid = static_cast<pid_t>(server.driver.pid);
  const ProcessInfo& s = *server.linux_process;
  std::string waiting_list;
  std::set<std::string> waiting_users;
  EvidenceList waiting_json;
  for (const auto& w : waiting) {
    waiting_list += fmt::format("{}{} ({}, user {})", waiting_list.empty() ? "" : ", ", w.pid, w.comm, w.user);
    waiting_users.insert(w.user);
    waiting_json.push_back(Evidence{{"pid", w.pid}, {"uid", w.uid}, {"user", w.user}, {"comm", w.comm}});
  }
  std::string users_text;
  for (const auto& u : waiting_users) users_text += (users_text.empty() ? "" : ", ") + u;
  std::string client_list;
  for (pid_t c : clients) client_list += (client_list.empty() ? "" : " ") + std::to_string(c);

  Finding f;
  f.id = FindingId::MpsClientWaiting;
  f.severity = Severity::Warning;
  f.gpu = server.gpu_index;
  f.summary = fmt::format("{} MPS client{} of {} wait{} for MPS server {} of {} to lose its {} client{}",
                          waiting.size(), waiting.size() == 1 ? "" : "s", users_text, waiting.size() == 1 ? "s" : "",
                          pid, s.user, clients.size(), clients.size() == 1 ? "" : "s");
  f.details.push_back(
      "A control daemon runs one user's server at a time: a client of another user waits (its CUDA calls block) "
      "until every client of the current server has exited; the daemon then ends that server and starts one for "
      "the waiting user.");
  f.details.push_back("Waiting: " + waiting_list);
  f.details.push_back(fmt::format("Server {} (user {}, control daemon {}) serves: {}", pid, s.user,
                                  *server.mps_control_daemon, client_list.empty() ? "no client the driver lists" : client_list));
  f.evidence["server_pid"] = pid;
  f.evidence["server_uid"] = s.uid;
  f.evidence["server_user"] = s.user;
  f.evidence["control_daemon_pid"] = *server.mps_control_daemon;
  f.evidence["server_clients"] = clients;
  f.evidence["waiting"] = waiting_json;
  f.remedies.push_back({"", Risk::None,
                        "wait: once the server's clients are done, the waiting clients get a server of their own user",
                        false});
  f.remedies.push_back({"", Risk::None,
                        "give each user a control daemon of their own (its own CUDA_MPS_PIPE_DIRECTORY), or run the "
                        "waiting programs as the server's user, so that they stop queueing behind it",
                        false});
  std::string waiting_pids;
  for (const auto& w : waiting) waiting_pids += " " + std::to_string(w.pid);
  f.remedies.push_back({"gpureap kill" + waiting_pids, Risk::Medium,
                        "end the waiting programs: they have no GPU work yet, and nobody else is touched", false});
  if (!client_list.empty()) {
    f.remedies.push_back({"gpureap kill " + client_list, Risk::Medium,
                          "end the server's clients (through terminate_client: their GPU work is lost); the waiting "
                          "clients are served once they are gone",
                          false});
  }
  diagnosis.findings.push_back(std::move(f));
}

}  // namespace

void check_mps_waiting_clients(const Snapshot& snapshot, Diagnosis& diagnosis) {
  UserNames users;
  std::set<pid_t> seen;
  for (const auto& v : snapshot.processes) {
    if (v.mps_role != MpsRole::Server || !v.mps_control_daemon || v.linux_process == nullptr) continue;
    const MpsControlDaemon* daemon = snapshot.mps_daemon(*v.mps_control_daemon);
    const pid_t server = static_cast<pid_t>(v.driver.pid);
    if (daemon == nullptr || !seen.insert(server).second) continue;  // listed once per GPU: reported once
    const auto waiting = waiting_clients(snapshot, *daemon, v, users);
    if (waiting.empty()) continue;
    std::vector<pid_t> clients;
    for (const auto& c : snapshot.processes) {
      const pid_t cp = static_cast<pid_t>(c.driver.pid);
      if (c.mps_server == server && std::find(clients.begin(), clients.end(), cp) == clients.end()) clients.push_back(cp);
    }
    report_waiting(v, clients, waiting, diagnosis);
  }
}

}  // namespace gpureap
