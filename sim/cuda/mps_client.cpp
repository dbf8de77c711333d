#include "cuda/mps_client.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <fmt/core.h>

#include "cuda/signals.hpp"
#include "mps/protocol.hpp"

namespace gpusim::cuda {

namespace {

// A CUDA error line on stderr; a closed or full stderr loses it, nothing more.
void say(const std::string& text) {
  std::string line = "gpusim-cuda: CUDA error: " + text + "\n";
  [[maybe_unused]] ssize_t n = ::write(2, line.data(), line.size());
}

void release(std::vector<ContextLocks>& contexts) {
  for (ContextLocks& c : contexts) {
    if (c.hold_fd >= 0) ::close(c.hold_fd);
    if (c.owner_fd >= 0) ::close(c.owner_fd);
    c.hold_fd = c.owner_fd = -1;
  }
}

}  // namespace

Result<std::optional<MpsSession>> join_mps(int* exit_status) {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  if (dir == nullptr || *dir == '\0') return std::optional<MpsSession>{};
  int fd = mps::connect_to(mps::control_socket(dir));
  if (fd < 0) return std::optional<MpsSession>{};
  if (!mps::send_msg(fd, "client")) {
    ::close(fd);
    return std::optional<MpsSession>{};
  }
  auto reply = mps::recv_msg(fd, -1);
  auto w = reply ? mps::words(*reply) : std::vector<std::string>{};
  if (w.size() == 2 && w[0] == "ok") {
    return std::optional<MpsSession>{MpsSession{fd, static_cast<unsigned>(std::strtoul(w[1].c_str(), nullptr, 10))}};
  }
  ::close(fd);
  *exit_status = kExitMpsServerNotReady;
  if (w.size() == 1 && w[0] == "notready") {
    return Error{"cudaErrorMpsServerNotReady: the MPS server is not ready to accept new MPS client requests"};
  }
  return Error{"cudaErrorMpsConnectionFailed: the MPS control daemon did not connect this client to a server"};
}

int mps_client_life(const MpsSession& session, const Options& opts, std::vector<ContextLocks>& contexts) {
  // Its CUDA errors go to stderr, which the reader may have closed: a diagnostic must not kill it.
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t blocked;
  ::sigprocmask(SIG_BLOCK, nullptr, &blocked);
  int sfd = ::signalfd(-1, &blocked, SFD_CLOEXEC);
  const std::int64_t deadline = opts.exit_after_ms ? monotonic_ms() + static_cast<std::int64_t>(*opts.exit_after_ms) : 0;
  bool attached = true;   // the server still counts this client's work as outstanding
  int server_fd = session.fd;
  for (;;) {
    int timeout = -1;
    if (opts.exit_after_ms) {
      std::int64_t left = deadline - monotonic_ms();
      if (left <= 0) {
        if (attached) mps::send_msg(server_fd, "bye");  // a clean end: CUDA detaches from the server
        return kExitOk;
      }
      timeout = static_cast<int>(left);
    }
    pollfd fds[2] = {{sfd, POLLIN, 0}, {server_fd, POLLIN, 0}};
    if (::poll(fds, 2, timeout) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo si{};
      if (::read(sfd, &si, sizeof si) == static_cast<ssize_t>(sizeof si) && si.ssi_signo != SIGCHLD) {
        if (opts.on_sigterm.kind == TermPolicy::Slow) ::usleep(opts.on_sigterm.slow_ms * 1000);
        die_of_signal(static_cast<int>(si.ssi_signo));
      }
    }
    if (server_fd >= 0 && fds[1].revents != 0) {
      auto msg = mps::recv_msg(server_fd, 0);
      if (msg && *msg == "terminated") {
        attached = false;
        release(contexts);
        // CUDA tears the connection down; the server stops counting it as a client.
        mps::send_msg(server_fd, "bye");
        ::close(server_fd);
        server_fd = -1;
        say("cudaErrorMpsClientTerminated: the MPS server ended this client's work (terminate_client)");
        if (opts.mps_on_terminate == MpsOnTerminate::Exit) return kExitMpsTerminated;
      } else if (msg && *msg == "fault") {
        say(fmt::format("a fatal exception in another client of MPS server {} reached this one; its work is "
                        "lost (it hangs until it exits)",
                        session.server_pid));
      } else if (!msg) {
        say(fmt::format("cudaErrorMpsConnectionFailed: lost MPS server {}", session.server_pid));
        ::close(server_fd);
        server_fd = -1;
        attached = false;
      }
    }
  }
}

}  // namespace gpusim::cuda
