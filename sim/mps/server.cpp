// nvidia-cuda-mps-server, simulated. Started by the control daemon for one UID: it creates
// the shared context (its own memory on every GPU), takes the clients the daemon hands over,
// and keeps their fates tied together the way NVIDIA documents it:
//
//  * A client that ends while its work is outstanding (killed by a signal, or gone without
//    detaching) is a fatal fault for the server: every other client is told (its work is
//    lost, it keeps running until it exits, as a hung CUDA program does), new clients are
//    refused (cudaErrorMpsServerNotReady) and the server recovers once all of them have exited.
//  * terminate_client ends one client's work cleanly: the client's memory is freed and it may
//    then exit or be ended by any means without harming anyone.
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fmt/core.h>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/layout.hpp"
#include "common/size.hpp"
#include "cuda/contexts.hpp"
#include "mps/mps.hpp"
#include "mps/protocol.hpp"

namespace gpusim::mps {

namespace {

struct Client {
  int fd = -1;
  unsigned pid = 0;
  bool terminated = false;  // its work was ended through terminate_client
};

enum class ServerState { Active, Fault };

class Server {
 public:
  Server(int daemon_fd, int log_fd) : daemon_fd_(daemon_fd), log_fd_(log_fd) {}

  int run() {
    for (;;) {
      std::vector<pollfd> fds;
      fds.push_back({daemon_gone_ ? -1 : daemon_fd_, POLLIN, 0});
      for (const Client& c : clients_) fds.push_back({c.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;
      if (fds[0].revents != 0) {
        if (!on_daemon()) return kExitOk;
      }
      std::vector<unsigned> readable;
      for (std::size_t i = 1; i < fds.size(); ++i) {
        if (fds[i].revents != 0) readable.push_back(clients_[i - 1].pid);
      }
      for (unsigned pid : readable) on_client(pid);
      if (clients_.empty() && daemon_gone_) {
        append_log(log_fd_, "Server exiting: the control daemon is gone and no client is left");
        return kExitOk;
      }
    }
  }

 private:
  // False: the server must exit.
  bool on_daemon() {
    int fd = -1;
    auto msg = recv_msg(daemon_fd_, 0, &fd);
    if (!msg) {
      daemon_gone_ = true;
      return !clients_.empty();
    }
    auto w = words(*msg);
    if (w.size() == 2 && w[0] == "client" && fd >= 0) {
      unsigned pid = static_cast<unsigned>(std::strtoul(w[1].c_str(), nullptr, 10));
      if (state_ == ServerState::Fault) {
        send_msg(fd, "notready");
        ::close(fd);
        append_log(log_fd_, fmt::format("Client {} refused: the server is recovering from a fault", pid));
        send_msg(daemon_fd_, "refused");
      } else {
        clients_.push_back({fd, pid, false});
        send_msg(fd, fmt::format("ok {}", ::getpid()));
        append_log(log_fd_, fmt::format("New client {} connected", pid));
        send_msg(daemon_fd_, "ok");
      }
    } else if (w.size() == 1 && w[0] == "list") {
      std::string reply = state_ == ServerState::Active ? "ACTIVE" : "FAULT";
      for (const Client& c : clients_) reply += " " + std::to_string(c.pid);
      send_msg(daemon_fd_, reply);
    } else if (w.size() == 2 && w[0] == "terminate") {
      unsigned pid = static_cast<unsigned>(std::strtoul(w[1].c_str(), nullptr, 10));
      auto it = find(pid);
      if (it == clients_.end()) {
        send_msg(daemon_fd_, "nosuch");
      } else {
        it->terminated = true;
        send_msg(it->fd, "terminated");
        append_log(log_fd_, fmt::format("Client {} terminated: its outstanding work was ended", pid));
        send_msg(daemon_fd_, "ok");
      }
    } else if (w.size() == 1 && w[0] == "quit") {
      append_log(log_fd_, "Server exiting on the control daemon's request");
      return false;
    } else if (fd >= 0) {
      ::close(fd);
    }
    return true;
  }

  void on_client(unsigned pid) {
    auto it = find(pid);
    if (it == clients_.end()) return;
    auto msg = recv_msg(it->fd, 0);
    if (msg && *msg != "bye") return;  // nothing else is said; ignore
    bool clean = msg.has_value() || it->terminated;
    ::close(it->fd);
    clients_.erase(it);
    if (clean) {
      append_log(log_fd_, fmt::format("Client {} disconnected", pid));
    } else {
      // NVIDIA: a fatal exception in one client reaches every client of the server; the
      // server then waits for all of them to exit and refuses new ones meanwhile.
      append_log(log_fd_, fmt::format("Client {} ended with work outstanding: fatal fault, "
                                      "every client of this server is affected", pid));
      state_ = ServerState::Fault;
      for (const Client& c : clients_) send_msg(c.fd, "fault");
    }
    if (clients_.empty() && state_ == ServerState::Fault) {
      state_ = ServerState::Active;
      append_log(log_fd_, "All clients have exited: the server recovered");
    }
  }

  std::vector<Client>::iterator find(unsigned pid) {
    return std::find_if(clients_.begin(), clients_.end(), [&](const Client& c) { return c.pid == pid; });
  }

  int daemon_fd_;
  int log_fd_;
  bool daemon_gone_ = false;
  ServerState state_ = ServerState::Active;
  std::vector<Client> clients_;
};

// The server's own memory per GPU: $GPUSIM_MPS_SERVER_MEMORY, else 64 MiB.
std::uint64_t server_bytes() {
  const char* v = std::getenv("GPUSIM_MPS_SERVER_MEMORY");
  if (v != nullptr) {
    if (auto b = parse_size(v); b.ok()) return *b;
  }
  return 64ULL << 20;
}

}  // namespace

int server_main(int argc, char** argv) {
  long uid = -1, gid = -1, fd = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string opt = argv[i];
    long v = std::strtol(argv[i + 1], nullptr, 10);
    if (opt == "--uid") uid = v;
    if (opt == "--gid") gid = v;
    if (opt == "--fd") fd = v;
  }
  if (uid < 0 || gid < 0 || fd < 0) {
    fmt::print(stderr, "nvidia-cuda-mps-server: started only by nvidia-cuda-mps-control\n");
    return kExitUsage;
  }
  const int daemon_fd = static_cast<int>(fd);
  ::fcntl(daemon_fd, F_SETFD, FD_CLOEXEC);
  auto fail = [&](const std::string& why) {
    send_msg(daemon_fd, "error " + why);
    return kExitError;
  };
  // The log first, while the daemon's privileges can still open it.
  int log_fd = ::open(server_log(dirs_from_env().log).c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (::geteuid() == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(gid)) != 0 ||
        ::setuid(static_cast<uid_t>(uid)) != 0) {
      return fail("cannot take on the client's user id");
    }
  } else if (::getuid() != static_cast<uid_t>(uid)) {
    return fail("a server for another user needs a control daemon running as root");
  }
  auto state = state_dir_from_env();
  if (!state) return fail("no simulator state: GPUSIM_STATE_DIR is unset");
  Layout layout(*state);
  auto config = load_config(layout.config());
  if (!config.ok()) return fail(config.error().message);
  cuda::Options opts;
  for (unsigned g = 0; g < config->gpus.size(); ++g) {
    if (config->gpus[g].lost || config->gpus[g].mig_enabled) continue;
    opts.allocs.push_back({g, server_bytes(), ProcType::Compute, std::nullopt});
  }
  auto owner = cuda::identify_self();
  if (!owner.ok()) return fail(owner.error().message);
  cuda::AttachError err;
  auto device_fds = cuda::open_device_files(layout, *config, opts, &err);
  if (!device_fds.ok()) return fail(err.message);
  auto contexts = cuda::create_contexts(layout, *config, opts, *owner, &err);
  if (!contexts.ok()) return fail(err.message);
  append_log(log_fd, fmt::format("Server {} started for uid {}", owner->host_pid, uid));
  if (!send_msg(daemon_fd, "ready")) return kExitError;
  return Server(daemon_fd, log_fd).run();
}

}  // namespace gpusim::mps
