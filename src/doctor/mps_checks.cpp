// NVIDIA MPS: a server that holds memory with no client, and a pipe directory that outlived its
// control daemon. Diagnosis runs no program: what it says comes from the snapshot's proven roles
// (snapshot/mps_roles.hpp), the kernel's socket table and the pipe directory's files. A server
// a client's death left faulted is known only to the control daemon (`get_server_status`,
// which means running its front end): doctor does not report it.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "doctor/doctor.hpp"
#include "proc/pinned_process.hpp"
#include "proc/proc_io.hpp"
#include "proc/unix_sockets.hpp"
#include "text/human_format.hpp"
#include "text/shell_quote.hpp"

namespace gpureap {
namespace {

// The files NVIDIA's control daemons create in the pipe directory: R535 the first four, R550
// also the pid file (docs/simulator.md, gpu-memory-facts.md §7).
constexpr const char* kPipeFiles[] = {"control", "control_privileged", "control_lock", "log",
                                      "nvidia-cuda-mps-control.pid"};

// Connections of the server other than to its control daemon: clients, listed by the driver
// or not yet. nullopt when the kernel's tables cannot tell.
std::optional<std::size_t> server_connections(const Snapshot& snapshot, const GpuProcessView& server) {
  const MpsControlDaemon* daemon = snapshot.mps_daemon(*server.mps_control_daemon);
  if (daemon == nullptr || server.linux_process == nullptr) return std::nullopt;
  const std::string& proc_root = snapshot.table.options().proc_root;
  std::string why;
  const auto pinned_server = procfs::PinnedProcess::pin(proc_root, static_cast<pid_t>(server.driver.pid),
                                                       server.linux_process->start_time_ticks, why);
  const auto pinned_daemon = procfs::PinnedProcess::pin(proc_root, daemon->pid, daemon->start_time_ticks, why);
  const auto table = procfs::read_unix_sockets();
  if (!pinned_server || !pinned_daemon || !table) return std::nullopt;
  const auto daemon_sockets = pinned_daemon->socket_inodes();
  const auto peers = procfs::peers_of(*table, pinned_server->socket_inodes());
  return static_cast<std::size_t>(
      std::count_if(peers.begin(), peers.end(), [&](std::uint64_t peer) { return daemon_sockets.count(peer) == 0; }));
}

void check_idle_server(const Snapshot& snapshot, const GpuProcessView& server, Diagnosis& diagnosis) {
  const pid_t pid = static_cast<pid_t>(server.driver.pid);
  for (const auto& v : snapshot.processes) {
    if (v.mps_server == pid) return;  // a client the driver lists
  }
  if (!server.driver.used_memory || *server.driver.used_memory == 0 || !server.mps_control_daemon) return;
  const auto connections = server_connections(snapshot, server);
  if (!connections || *connections > 0) return;  // a client the driver does not list yet, or unknown
  Finding f;
  f.id = FindingId::MpsServerIdle;
  f.severity = Severity::Info;
  f.gpu = server.gpu_index;
  f.summary = fmt::format("MPS server {} holds {} with no client", pid, format_bytes(server.driver.used_memory));
  f.details.push_back("The control daemon keeps a server until the daemon quits, or until a client of another user "
                      "needs the GPU; its memory stays in use meanwhile. No process is connected to it (the "
                      "kernel's socket table).");
  f.evidence["server_pid"] = pid;
  f.evidence["control_daemon_pid"] = *server.mps_control_daemon;
  f.evidence["bytes"] = *server.driver.used_memory;
  f.remedies.push_back({"", Risk::None, "leave it: the next client of the same user starts faster", false});
  f.remedies.push_back({fmt::format("gpureap kill {}", pid), Risk::Low,
                        "end the idle server (no client loses work); the daemon starts a new one on demand", false});
  diagnosis.findings.push_back(std::move(f));
}

// The pipe directory in $CUDA_MPS_PIPE_DIRECTORY (else /tmp/nvidia-mps), only when root owns it
// and nobody else can write it: anything in a directory a user can write is that user's to say,
// and root is never pointed at it. Stale: its `control` socket file is there and no socket of
// this network namespace listens on it (sock_diag: bound to that very file).
void check_pipe_directory(Diagnosis& diagnosis) {
  const char* env = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string dir = env != nullptr && *env == '/' ? env : "/tmp/nvidia-mps";
  const procfs::unique_fd dir_fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct stat dir_info {};
  if (!dir_fd || ::fstat(dir_fd.get(), &dir_info) != 0) return;
  if (dir_info.st_uid != 0 || (dir_info.st_mode & (S_IWGRP | S_IWOTH)) != 0) return;
  struct stat control {};
  if (::fstatat(dir_fd.get(), "control", &control, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(control.st_mode)) return;
  const auto table = procfs::read_unix_sockets();
  if (!table) return;  // unknown: nothing said
  for (const auto& [ino, socket] : *table) {
    if (socket.listening && socket.file_dev == control.st_dev && socket.file_ino == control.st_ino) return;
  }
  std::string left;
  for (const char* name : kPipeFiles) {
    struct stat file {};
    if (::fstatat(dir_fd.get(), name, &file, AT_SYMLINK_NOFOLLOW) == 0) left += " " + shell_quote(dir + "/" + name);
  }
  Finding f;
  f.id = FindingId::MpsStalePipeDirectory;
  f.severity = Severity::Warning;
  f.summary = fmt::format("MPS pipe directory {} outlived its control daemon (nothing listens on its control socket)",
                          dir);
  f.details.push_back("The daemon did not quit cleanly (killed, or its host container stopped): its socket files "
                      "remain. CUDA programs then run without MPS, and a daemon started again with the same "
                      "directory replaces them.");
  f.details.push_back("Seen from this network namespace: a daemon in another one (a container's) is not seen.");
  f.evidence["pipe_directory"] = dir;
  f.remedies.push_back({fmt::format("CUDA_MPS_PIPE_DIRECTORY={} nvidia-cuda-mps-control -d", shell_quote(dir)), Risk::Low,
                        "start the control daemon again where the clients look for it", false});
  f.remedies.push_back({"rm" + left, Risk::Low, "remove what the dead daemon left, when MPS is no longer wanted here",
                        false});
  diagnosis.findings.push_back(std::move(f));
}

}  // namespace

void check_mps(const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis) {
  for (const auto& v : snapshot.processes) {
    if (v.mps_role == MpsRole::Server) check_idle_server(snapshot, v, diagnosis);
  }
  if (options.check_mps_waiting) check_mps_waiting_clients(snapshot, diagnosis);
  check_pipe_directory(diagnosis);
}

}  // namespace gpureap
