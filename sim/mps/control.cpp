// nvidia-cuda-mps-control, simulated: the control daemon (-d, -f) and its command front-end.
//
// The daemon listens on $CUDA_MPS_PIPE_DIRECTORY/control. A CUDA client's first message is
// "client": the daemon starts a server for the client's UID if there is none, hands the
// connection to the server of that UID, or, while another UID's server has clients, queues
// the client and asks that server to end once its clients are done (as the man page says).
// The front-end's message is "cmd <line>", answered with the command's output.
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/core.h>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/file_io.hpp"
#include "mps/mps.hpp"
#include "mps/protocol.hpp"

namespace gpusim::mps {

namespace {

struct ServerProc {
  pid_t pid = -1;
  uid_t uid = 0;
  int sock = -1;
  bool draining = false;  // another UID waits: end once the clients are done
};

struct Waiting {
  int fd = -1;
  Peer peer;
};

struct ServerListing {
  std::string state;  // ACTIVE or FAULT
  std::vector<unsigned> clients;
};

std::string self_dir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.rfind('/'));
}

class Daemon {
 public:
  Daemon(Dirs dirs, int listen_fd, int privileged_fd, int log_fd)
      : dirs_(std::move(dirs)), listen_fd_(listen_fd), privileged_fd_(privileged_fd), log_fd_(log_fd) {}

  int run() {
    for (;;) {
      std::vector<pollfd> fds;
      fds.push_back({listen_fd_, POLLIN, 0});
      fds.push_back({privileged_fd_, POLLIN, 0});
      for (const Waiting& w : queue_) fds.push_back({w.fd, POLLIN, 0});
      int rc = ::poll(fds.data(), fds.size(), queue_.empty() ? 500 : 50);
      reap();
      if (rc > 0) {
        for (std::size_t i = fds.size() - 1; i >= 2; --i) {
          if (fds[i].revents & (POLLHUP | POLLERR | POLLIN)) drop_waiting(fds[i].fd);
        }
        for (int listener : {0, 1}) {
          if ((fds[listener].revents & POLLIN) && !accept_one(fds[listener].fd)) return kExitOk;
        }
      }
      serve_queue();
    }
  }

 private:
  // False after quit.
  bool accept_one(int listener) {
    int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return true;
    auto msg = recv_msg(fd, 1000);
    auto peer = peer_of(fd);
    if (!msg || !peer) {
      ::close(fd);
      return true;
    }
    if (*msg == "client") {
      route({fd, *peer});
      return true;
    }
    if (msg->rfind("cmd ", 0) == 0) {
      bool quit = false;
      std::string reply = command(msg->substr(4), *peer, &quit);
      send_msg(fd, reply.empty() ? std::string("\n") : reply);
      ::close(fd);
      if (quit) shutdown();
      return !quit;
    }
    ::close(fd);
    return true;
  }

  void route(Waiting w) {
    append_log(log_fd_, fmt::format("Accepting connection from client {} (uid {})", w.peer.pid, w.peer.uid));
    if (!alive()) start_server(w.peer.uid, w.peer.gid);
    if (alive() && server_->uid == w.peer.uid && !server_->draining) {
      hand_over(w);
      return;
    }
    if (alive()) {
      server_->draining = true;
      append_log(log_fd_, fmt::format("Client {} (uid {}) waits: the server {} of uid {} ends once its clients are done",
                                      w.peer.pid, w.peer.uid, server_->pid, server_->uid));
    }
    queue_.push_back(w);
  }

  void hand_over(const Waiting& w) {
    send_msg(server_->sock, fmt::format("client {}", w.peer.pid), w.fd);
    auto reply = recv_msg(server_->sock, 5000);
    ::close(w.fd);
    if (!reply || *reply != "ok") {
      append_log(log_fd_, fmt::format("Client {} refused by server {}", w.peer.pid, server_->pid));
    }
  }

  // Waiting clients whose server can be started now get it.
  void serve_queue() {
    if (queue_.empty()) return;
    if (alive()) {
      auto listing = list(*server_);
      if (!listing || !listing->clients.empty()) return;
      stop_server();
    }
    uid_t uid = queue_.front().peer.uid;
    start_server(uid, queue_.front().peer.gid);
    if (!alive()) return;
    std::vector<Waiting> rest;
    for (const Waiting& w : queue_) {
      if (w.peer.uid == uid) {
        hand_over(w);
      } else {
        rest.push_back(w);
      }
    }
    queue_ = rest;
    if (!queue_.empty()) server_->draining = true;
  }

  void drop_waiting(int fd) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->fd == fd) {
        append_log(log_fd_, fmt::format("Waiting client {} went away", it->peer.pid));
        ::close(fd);
        queue_.erase(it);
        return;
      }
    }
  }

  void start_server(uid_t uid, gid_t gid) {
    int sp[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return;
    std::string path = self_dir() + "/nvidia-cuda-mps-server";
    pid_t pid = ::fork();
    if (pid == 0) {
      ::fcntl(sp[1], F_SETFD, 0);
      std::string u = std::to_string(uid), g = std::to_string(gid), f = std::to_string(sp[1]);
      const char* argv[] = {"nvidia-cuda-mps-server", "--uid", u.c_str(), "--gid", g.c_str(), "--fd", f.c_str(), nullptr};
      ::execv(path.c_str(), const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(sp[1]);
    if (pid < 0) {
      ::close(sp[0]);
      return;
    }
    auto ready = recv_msg(sp[0], 10000);
    if (!ready || *ready != "ready") {
      append_log(log_fd_, fmt::format("Server for uid {} failed to start: {}", uid, ready ? *ready : "no answer"));
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      ::close(sp[0]);
      return;
    }
    server_ = ServerProc{pid, uid, sp[0], false};
    append_log(log_fd_, fmt::format("Starting new server {} for user {}", pid, uid));
  }

  void stop_server() {
    if (!server_) return;
    send_msg(server_->sock, "quit");
    for (int i = 0; i < 500 && ::waitpid(server_->pid, nullptr, WNOHANG) == 0; ++i) ::usleep(10000);
    append_log(log_fd_, fmt::format("Server {} exited", server_->pid));
    ::close(server_->sock);
    server_.reset();
  }

  bool alive() const { return server_.has_value(); }

  void reap() {
    for (;;) {
      pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
      if (pid <= 0) return;
      if (server_ && server_->pid == pid) {
        append_log(log_fd_, fmt::format("Server {} exited", pid));
        ::close(server_->sock);
        server_.reset();
      }
    }
  }

  std::optional<ServerListing> list(const ServerProc& s) {
    if (!send_msg(s.sock, "list")) return std::nullopt;
    auto reply = recv_msg(s.sock, 5000);
    if (!reply) return std::nullopt;
    auto w = words(*reply);
    if (w.empty()) return std::nullopt;
    ServerListing l{w[0], {}};
    for (std::size_t i = 1; i < w.size(); ++i) l.clients.push_back(static_cast<unsigned>(std::strtoul(w[i].c_str(), nullptr, 10)));
    return l;
  }

  bool names_server(const std::string& word) const {
    return alive() && word == std::to_string(server_->pid);
  }

  // The command interface NVIDIA documents for the Legacy MPS v2 shell (mpsv2-interface),
  // the subset the simulator needs. Output wording is the simulator's.
  std::string command(const std::string& line, const Peer& peer, bool* quit) {
    auto w = words(line);
    if (w.empty()) return "";
    append_log(log_fd_, fmt::format("User {} sent command: {}", peer.uid, w[0]));
    const std::string& cmd = w[0];
    if (cmd == "get_server_list") return alive() ? std::to_string(server_->pid) : "";
    if (cmd == "get_server_status" && w.size() == 2) {
      if (!names_server(w[1])) return "Server " + w[1] + " not found";
      auto l = list(*server_);
      return l ? l->state : "Server " + w[1] + " not responding";
    }
    if (cmd == "get_client_list" && w.size() == 2) {
      if (!names_server(w[1])) return "Server " + w[1] + " not found";
      auto l = list(*server_);
      std::string out;
      if (l) {
        for (unsigned c : l->clients) out += (out.empty() ? "" : "\n") + std::to_string(c);
      }
      return out;
    }
    if (cmd == "ps") return ps();
    if (cmd == "terminate_client" && w.size() == 3) {
      if (!names_server(w[1])) return "Server " + w[1] + " not found";
      if (!send_msg(server_->sock, "terminate " + w[2])) return "Server " + w[1] + " not responding";
      auto r = recv_msg(server_->sock, 5000);
      if (r && *r == "ok") return "";
      return "Client " + w[2] + " not found on server " + w[1];
    }
    if (cmd == "start_server" && w.size() == 3 && w[1] == "-uid") {
      uid_t uid = static_cast<uid_t>(std::strtoul(w[2].c_str(), nullptr, 10));
      if (alive()) return "A server is already running";
      const passwd* pw = ::getpwuid(uid);
      start_server(uid, pw != nullptr ? pw->pw_gid : static_cast<gid_t>(uid));
      return alive() ? "" : "Cannot start the server";
    }
    if (cmd == "get_default_active_thread_percentage") return fmt::format("{:.1f}", active_thread_percentage_);
    if (cmd == "set_default_active_thread_percentage" && w.size() == 2) {
      char* end = nullptr;
      double v = std::strtod(w[1].c_str(), &end);
      if (end == w[1].c_str() || *end != '\0' || v <= 0 || v > 100) return "Invalid percentage " + w[1];
      active_thread_percentage_ = v;
      return fmt::format("{:.1f}", v);
    }
    if (cmd == "quit") {
      *quit = true;
      return "";
    }
    return "Invalid command: " + cmd;
  }

  // One row per client: PID, ID (its index), SERVER, DEVICE (the GPUs the server covers),
  // NAMESPACE (the client's PID namespace) and COMMAND (its comm).
  std::string ps() {
    std::string out = "PID ID SERVER DEVICE NAMESPACE COMMAND";
    if (!alive()) return out;
    auto l = list(*server_);
    if (!l) return out;
    unsigned id = 0;
    for (unsigned c : l->clients) {
      char ns[128] = {};
      std::string nspath = "/proc/" + std::to_string(c) + "/ns/pid";
      ssize_t n = ::readlink(nspath.c_str(), ns, sizeof ns - 1);
      ReadResult comm = read_file("/proc/" + std::to_string(c) + "/comm");
      std::string name = comm.ok() ? comm.data.substr(0, comm.data.find('\n')) : "?";
      out += fmt::format("\n{} {} {} all {} {}", c, id++, server_->pid, n > 0 ? std::string(ns, static_cast<std::size_t>(n)) : "?",
                         name);
    }
    return out;
  }

  void shutdown() {
    stop_server();
    for (const Waiting& w : queue_) ::close(w.fd);
    queue_.clear();
    // As the real daemon: the pid file and the log FIFO go, the sockets and the lock stay.
    ::unlink(pid_file(dirs_.pipe).c_str());
    ::unlink(log_fifo(dirs_.pipe).c_str());
    append_log(log_fd_, "Control daemon exiting");
  }

  Dirs dirs_;
  int listen_fd_;
  int privileged_fd_;
  int log_fd_;
  std::optional<ServerProc> server_;
  std::vector<Waiting> queue_;
  double active_thread_percentage_ = 100.0;
};

int make_listener(const std::string& path, mode_t mode) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return -1;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  ::unlink(path.c_str());  // a stale socket of a dead daemon (checked by the caller)
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0) {
    ::close(fd);
    return -1;
  }
  ::chmod(path.c_str(), mode);
  return fd;
}

// Which real daemon to be: $GPUSIM_MPS_VERSION, 535 or 550 (the default). They differ in the
// pid file: R535 writes none, R550 one of mode 0666 (docs/simulator.md, MPS).
std::optional<int> release_from_env() {
  const char* text = std::getenv("GPUSIM_MPS_VERSION");
  if (text == nullptr || std::string(text).empty()) return 550;
  const std::string version(text);
  if (version == "535" || version == "550") return std::stoi(version);
  return std::nullopt;
}

// The FIFO and the lock file the real daemon leaves in its pipe directory, with its modes.
bool make_pipe_files(const std::string& pipe_dir) {
  ::unlink(log_fifo(pipe_dir).c_str());
  if (::mkfifo(log_fifo(pipe_dir).c_str(), 0777) != 0 || ::chmod(log_fifo(pipe_dir).c_str(), 0777) != 0) return false;
  return touch_file(control_lock(pipe_dir), 0666).ok();
}

int start_daemon(bool background) {
  Dirs dirs = dirs_from_env();
  const auto release = release_from_env();
  if (!release) {
    fmt::print(stderr, "nvidia-cuda-mps-control: GPUSIM_MPS_VERSION must be 535 or 550\n");
    return kExitUsage;
  }
  if (std::getenv("GPUSIM_STATE_DIR") == nullptr) {
    fmt::print(stderr, "nvidia-cuda-mps-control: GPUSIM_STATE_DIR is unset: no simulated GPU to serve\n");
    return kExitError;
  }
  for (const std::string& d : {dirs.pipe, dirs.log}) {
    if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
      fmt::print(stderr, "nvidia-cuda-mps-control: cannot create {}: {}\n", d, errno_text(errno));
      return kExitError;
    }
  }
  int probe = connect_to(control_socket(dirs.pipe));
  if (probe >= 0) {
    ::close(probe);
    fmt::print(stderr, "An instance of this daemon is already running\n");
    return kExitError;
  }
  int ready[2];
  if (background) {
    if (::pipe2(ready, O_CLOEXEC) != 0) return kExitError;
    pid_t pid = ::fork();
    if (pid < 0) return kExitError;
    if (pid > 0) {
      ::close(ready[1]);
      char c = 0;
      ssize_t n;
      do {
        n = ::read(ready[0], &c, 1);
      } while (n < 0 && errno == EINTR);
      return n == 1 && c == '1' ? kExitOk : kExitError;
    }
    ::close(ready[0]);
    ::setsid();
  }
  // Every user's CUDA programs connect to `control`; `control_privileged` is the owner's.
  const int listen_fd = make_listener(control_socket(dirs.pipe), 0666);
  const int privileged_fd = listen_fd < 0 ? -1 : make_listener(privileged_socket(dirs.pipe), 0755);
  if (listen_fd < 0 || privileged_fd < 0) {
    fmt::print(stderr, "nvidia-cuda-mps-control: cannot listen in {}: {}\n", dirs.pipe, errno_text(errno));
    return kExitError;
  }
  if (!make_pipe_files(dirs.pipe)) {
    fmt::print(stderr, "nvidia-cuda-mps-control: cannot create the log FIFO and lock in {}: {}\n", dirs.pipe,
               errno_text(errno));
    return kExitError;
  }
  if (*release >= 550) {
    if (auto st = write_file_atomic(pid_file(dirs.pipe), std::to_string(::getpid()), 0666); !st.ok()) {
      fmt::print(stderr, "nvidia-cuda-mps-control: {}\n", st.error().message);
      return kExitError;
    }
  }
  int log_fd = ::open(control_log(dirs.log).c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  append_log(log_fd, fmt::format("Starting control daemon {} (pipe directory {})", ::getpid(), dirs.pipe));
  ::signal(SIGPIPE, SIG_IGN);
  if (background) {
    int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
      ::dup2(devnull, 0);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
    }
    [[maybe_unused]] ssize_t n = ::write(ready[1], "1", 1);
    ::close(ready[1]);
  }
  return Daemon(dirs, listen_fd, privileged_fd, log_fd).run();
}

// Each line of stdin is one command; its answer is printed as the daemon gave it.
int front_end() {
  Dirs dirs = dirs_from_env();
  int status = kExitOk;
  for (std::string line; std::getline(std::cin, line);) {
    if (words(line).empty()) continue;
    int fd = connect_to(control_socket(dirs.pipe));
    if (fd < 0) {
      fmt::print(stderr, "Cannot find MPS control daemon process\n");
      return kExitError;
    }
    send_msg(fd, "cmd " + line);
    auto reply = recv_msg(fd, 15000);
    ::close(fd);
    if (!reply) {
      fmt::print(stderr, "Receive command failed\n");
      status = kExitError;
      continue;
    }
    if (*reply != "\n") fmt::print("{}\n", *reply);
    std::fflush(stdout);
  }
  return status;
}

}  // namespace

int control_main(int argc, char** argv) {
  if (argc == 1) return front_end();
  std::string opt = argv[1];
  if (argc == 2 && opt == "-d") return start_daemon(true);
  if (argc == 2 && opt == "-f") return start_daemon(false);
  fmt::print(stderr, "usage: nvidia-cuda-mps-control [-d | -f]\n");
  return kExitUsage;
}

}  // namespace gpusim::mps
