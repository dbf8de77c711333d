// Test helper: what a hostile user starts to pose as an MPS control daemon, and a marker that
// says whether anyone ran it the way a front end is run.
//
//   fake-mps-parent [--listen DIR] [--socketpair] -- PROGRAM ARGS... [-- PROGRAM ARGS...]
//     With --listen: binds a socket listening at DIR/control (mode 0666) and writes
//     DIR/nvidia-cuda-mps-control.pid (mode 0666) with its own PID, as NVIDIA's R550 daemon
//     does. With --socketpair: a connected socket pair that every child inherits. Then starts
//     each PROGRAM as its child, in its process group (the first with its stdout, the
//     others with /dev/null), and waits until they have all exited.
//   Run any other way (a front end's way: no arguments, commands on stdin): appends one line,
//     "ran uid=<euid>", to $CUDA_MPS_PIPE_DIRECTORY/executed (or /tmp/fake-mps-parent.executed)
//     and exits 0. The hostile tests run it through a symlink named nvidia-cuda-mps-control: a
//     file of root's that is no MPS program, as /bin/bash was in the attack.
#include <fcntl.h>
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
#include <string>
#include <vector>

namespace {

int mark_run() {
  const char* pipe = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string path = pipe != nullptr && *pipe != '\0' ? std::string(pipe) + "/executed"
                                                             : std::string("/tmp/fake-mps-parent.executed");
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd >= 0) {
    const std::string line = "ran uid=" + std::to_string(::geteuid()) + "\n";
    [[maybe_unused]] const ssize_t n = ::write(fd, line.data(), line.size());
    ::close(fd);
  }
  return 0;
}

bool listen_at(const std::string& dir) {
  const std::string path = dir + "/control";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);  // inherited by nobody but kept open here
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 8) != 0) return false;
  ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  ::chmod(path.c_str(), 0666);
  const std::string pid_file = dir + "/nvidia-cuda-mps-control.pid";
  const int pf = ::open(pid_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (pf < 0) return false;
  ::fchmod(pf, 0666);
  const std::string text = std::to_string(::getpid()) + "\n";
  const bool written = ::write(pf, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(pf);
  return written;
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen_dir;
  bool socketpair_wanted = false;
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
      listen_dir = argv[++i];
    } else if (std::strcmp(argv[i], "--socketpair") == 0) {
      socketpair_wanted = true;
    } else {
      return mark_run();
    }
  }
  if (i >= argc) return mark_run();
  std::vector<std::vector<char*>> programs;
  for (; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      programs.emplace_back();
    } else {
      programs.back().push_back(argv[i]);
    }
  }
  if (!listen_dir.empty() && !listen_at(listen_dir)) {
    std::perror("fake-mps-parent: listen");
    return 1;
  }
  int pair[2] = {-1, -1};
  if (socketpair_wanted && ::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) {
    std::perror("fake-mps-parent: socketpair");
    return 1;
  }
  std::size_t started = 0;
  for (std::size_t n = 0; n < programs.size(); ++n) {
    if (programs[n].empty()) continue;
    programs[n].push_back(nullptr);
    const pid_t child = ::fork();
    if (child == 0) {
      if (n > 0) {
        const int null = ::open("/dev/null", O_WRONLY);
        if (null >= 0) ::dup2(null, STDOUT_FILENO);
      }
      ::execv(programs[n][0], programs[n].data());
      std::perror("fake-mps-parent: exec");
      _exit(127);
    }
    if (child > 0) ++started;
  }
  while (started > 0) {
    if (::wait(nullptr) > 0) {
      --started;
    } else if (errno != EINTR) {
      break;
    }
  }
  return 0;
}
