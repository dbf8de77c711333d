#include "kill/mps_terminate.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "kill/mps_private_pipe.hpp"
#include "proc/pinned_process.hpp"
#include "proc/unix_sockets.hpp"
#include "snapshot/mps_roles.hpp"
#include "spawn/timed_command.hpp"

namespace gpureap {
namespace {

// How often the server's client list is asked while the kernel's socket table shows the
// connection still open: each ask runs the front end once.
constexpr std::chrono::milliseconds kListInterval{250};

// The front end the daemon proves: its own executable and credentials, and where its pipe
// directory is reached from here.
struct FrontEnd {
  procfs::unique_fd program;
  Credentials credentials;
  std::optional<PrivatePipeDirectory> pipe;  // where it reaches the daemon and nothing else
  pid_t daemon = 0;
};

std::optional<FrontEnd> front_end_of(const MpsControlDaemon& daemon, const std::string& proc_root, std::string& why) {
  std::string pin_why;
  const auto pinned = procfs::PinnedProcess::pin(proc_root, daemon.pid, daemon.start_time_ticks, pin_why);
  if (!pinned) {
    why = fmt::format("MPS control daemon {}: {}", daemon.pid, pin_why);
    return std::nullopt;
  }
  const auto sockets = procfs::read_unix_sockets();
  if (!sockets) {
    why = "the kernel's socket table cannot be read to prove the MPS control daemon again";
    return std::nullopt;
  }
  const auto pipe = prove_mps_control_daemon(*pinned, *sockets, why);
  if (!pipe || *pipe != daemon.pipe_dir) {
    why = pipe ? fmt::format("MPS control daemon {} now listens in {}, not {}", daemon.pid, *pipe, daemon.pipe_dir)
               : fmt::format("MPS control daemon {} is no longer proven: {}", daemon.pid, why);
    return std::nullopt;
  }
  FrontEnd front;
  front.daemon = daemon.pid;
  front.program = pinned->open_executable();
  struct stat file {};
  if (!front.program || ::fstat(front.program.get(), &file) != 0) {
    why = fmt::format("the executable of MPS control daemon {} cannot be opened", daemon.pid);
    return std::nullopt;
  }
  if (!S_ISREG(file.st_mode) || file.st_uid != 0 || (file.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    why = fmt::format("the executable of MPS control daemon {} is not a file of root's that only root can write "
                      "(owner {}, mode {:04o}): it is not run",
                      daemon.pid, file.st_uid, file.st_mode & 07777);
    return std::nullopt;
  }
  const auto status = pinned->status();
  if (!status) {
    why = fmt::format("MPS control daemon {} has exited", daemon.pid);
    return std::nullopt;
  }
  front.credentials = Credentials{status->real_uid, status->real_gid, status->groups};
  front.pipe = PrivatePipeDirectory::make(root_from_here(proc_root, daemon.pid), daemon.pipe_dir,
                                         pinned->socket_inodes(), *sockets, why);
  if (!front.pipe) {
    why = fmt::format("MPS control daemon {}: {}", daemon.pid, why);
    return std::nullopt;
  }
  return front;
}

// One command through the front end; its answer (stdout and stderr), nullopt with `why` when
// it did not run or failed.
std::optional<std::string> ask(const FrontEnd& front, const std::string& line, std::chrono::milliseconds timeout,
                               std::string& why) {
  TimedCommand command;
  command.argv = {"nvidia-cuda-mps-control"};
  command.program_fd = front.program.get();
  command.run_as = front.credentials;
  command.timeout = timeout;
  command.give_input = true;
  command.input = line + "\n";
  command.extra_env = {"CUDA_MPS_PIPE_DIRECTORY=" + front.pipe->path()};
  command.max_output_bytes = 16 * 1024;
  const TimedRun run = run_timed_command(command);
  if (!run.ok()) {
    why = fmt::format("{} through MPS control daemon {}: {}", line, front.daemon, describe_timed_run(run, timeout));
    return std::nullopt;
  }
  return run.output;
}

bool names_line(const std::string& text, const std::string& word) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line == word) return true;
    start = end + 1;
  }
  return false;
}

std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "…";
  return line;  // the renderer sanitises what it shows
}

// Whether a socket of the client has its peer among the server's: its connection to the server.
bool connected(const procfs::UnixSocketTable& table, const std::set<std::uint64_t>& client,
               const std::set<std::uint64_t>& server) {
  const auto peers = procfs::peers_of(table, client);
  return std::any_of(peers.begin(), peers.end(), [&](std::uint64_t peer) { return server.count(peer) > 0; });
}

}  // namespace

MpsTerminateResult terminate_mps_client(const MpsControlDaemon& daemon, const PinTarget& server,
                                        const PinTarget& client, const std::string& proc_root,
                                        std::chrono::milliseconds timeout) {
  MpsTerminateResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string why;
  const auto front = front_end_of(daemon, proc_root, why);
  if (!front) {
    result.detail = why;
    return result;
  }
  // The server must be the daemon's own, as the daemon itself lists it.
  const auto servers = ask(*front, "get_server_list", timeout, why);
  if (!servers) {
    result.detail = why;
    return result;
  }
  if (!names_line(*servers, std::to_string(server.pid))) {
    result.detail = fmt::format("MPS control daemon {} does not list {} among its servers", daemon.pid, server.pid);
    return result;
  }
  const auto server_process = procfs::PinnedProcess::pin(proc_root, server.pid, server.start_time_ticks, why);
  if (!server_process) {
    result.detail = fmt::format("MPS server {}: {}", server.pid, why);
    return result;
  }
  const auto client_process = procfs::PinnedProcess::pin(proc_root, client.pid, client.start_time_ticks, why);
  if (!client_process) {
    result.ok = true;
    result.detail = fmt::format("it had exited before terminate_client ({})", why);
    return result;
  }
  const auto reply = ask(*front, fmt::format("terminate_client {} {}", server.pid, client.pid), timeout, why);
  const std::string reply_text = reply ? first_line(*reply) : why;
  const std::string me = std::to_string(client.pid);
  auto next_list = std::chrono::steady_clock::now();
  for (;;) {
    // The kernel's answer first: the client's connection to the server closed.
    if (const auto table = procfs::read_unix_sockets()) {
      const auto server_sockets = server_process->socket_inodes();
      if (server_process->still_there() && !connected(*table, client_process->socket_inodes(), server_sockets)) {
        break;
      }
    }
    if (std::chrono::steady_clock::now() >= next_list) {
      const auto list = ask(*front, fmt::format("get_client_list {}", server.pid), timeout, why);
      if (list && !names_line(*list, me)) break;
      next_list = std::chrono::steady_clock::now() + kListInterval;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      result.detail = fmt::format("terminate_client {} {} through MPS control daemon {} (answer: \"{}\"), but the "
                                  "server still holds the client after {} ms",
                                  server.pid, client.pid, daemon.pid, reply_text, timeout.count());
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.ok = true;
  result.detail = fmt::format("its MPS work was ended through terminate_client {} {} (control daemon {}): the server "
                              "let it go",
                              server.pid, client.pid, daemon.pid);
  return result;
}

}  // namespace gpureap
