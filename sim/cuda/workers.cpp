#include "cuda/workers.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/file_io.hpp"
#include "cuda/pidns.hpp"

namespace gpusim::cuda {

namespace {

// `children` are ours and not yet reaped: their PIDs cannot have been reused.
void signal_and_reap(const std::vector<pid_t>& children, int sig) {
  for (pid_t pid : children) ::kill(pid, sig);
  for (pid_t pid : children) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
}

// On failure no half-started worker may outlive us holding the contexts.
void kill_workers(const std::vector<Worker>& workers) {
  std::vector<pid_t> pids;
  for (const auto& w : workers) pids.push_back(w.pid);
  signal_and_reap(pids, SIGKILL);
}

[[noreturn]] void worker_main(int report_fd, pid_t parent, WorkerMode mode, TermPolicy on_sigterm) {
  if (mode == WorkerMode::DieWithParent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) std::_Exit(0);  // the parent died before prctl took effect
  }
  struct sigaction sa {};
  sa.sa_handler = on_sigterm.kind == TermPolicy::Ignore ? SIG_IGN : SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  sa.sa_handler = SIG_DFL;
  ::sigaction(SIGCHLD, &sa, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  char buf[32];
  ssize_t n = read_host_pid_link(buf, sizeof buf - 1);
  // "<pid in our namespace> <host pid>": the parent matches the first against fork()'s result.
  std::string line = std::to_string(::getpid()) + " " +
                     (n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string("0")) + "\n";
  // Lines shorter than PIPE_BUF are written atomically, so workers cannot interleave.
  ssize_t w;
  do {
    w = ::write(report_fd, line.data(), line.size());
  } while (w < 0 && errno == EINTR);
  ::close(report_fd);
  for (;;) ::pause();
}

}  // namespace

Result<std::vector<Worker>> fork_workers(unsigned count, WorkerMode mode, TermPolicy on_sigterm) {
  std::vector<Worker> workers;
  if (count == 0) return workers;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Error{std::string("pipe: ") + errno_text(errno)};
  std::fflush(nullptr);  // nothing buffered may be duplicated into the children
  pid_t parent = ::getpid();
  for (unsigned i = 0; i < count; ++i) {
    pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      kill_workers(workers);
      return Error{std::string("fork worker: ") + errno_text(errno)};
    }
    if (pid == 0) {
      ::close(fds[0]);
      worker_main(fds[1], parent, mode, on_sigterm);
    }
    workers.push_back({pid, 0});
  }
  ::close(fds[1]);

  // Collect one line from each worker, in whatever order they arrive.
  std::string data;
  unsigned reported = 0;
  while (reported < count) {
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, 10000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fds[0]);
      kill_workers(workers);
      return Error{"workers did not report their PIDs within 10 s"};
    }
    char buf[256];
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    std::size_t nl;
    while ((nl = data.find('\n')) != std::string::npos) {
      int ns_pid = 0;
      unsigned host_pid = 0;
      auto sp = data.find(' ');
      if (sp < nl) {
        std::from_chars(data.data(), data.data() + sp, ns_pid);
        std::from_chars(data.data() + sp + 1, data.data() + nl, host_pid);
      }
      for (auto& w : workers) {
        if (w.pid == ns_pid && w.host_pid == 0) {
          w.host_pid = host_pid;
          ++reported;
        }
      }
      data.erase(0, nl + 1);
    }
  }
  ::close(fds[0]);
  if (reported < count) {
    kill_workers(workers);
    return Error{"a worker exited before reporting its PID"};
  }
  return workers;
}

void join_workers(const std::vector<pid_t>& unreaped) { signal_and_reap(unreaped, SIGTERM); }

Status fork_zombie() {
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Error{std::string("fork: ") + errno_text(errno)};
  if (pid == 0) std::_Exit(0);
  return ok_status();
}

}  // namespace gpusim::cuda
