// A forked process that runs its steps one at a time when told, and waits after the last until
// the test ends it: opens, dups, forks, execs of a holder, each at the moment the test chooses.
// Fork only from a test process that runs no other thread (a step runs in the child).
// Plain C++ and POSIX, header only: the unit and the integration tests use it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

namespace gpureap::test {

class SteppedChild {
 public:
  using Step = std::function<void()>;
  explicit SteppedChild(std::vector<Step> steps) {
    int command[2], ack[2];
    if (::pipe2(command, O_CLOEXEC) != 0 || ::pipe2(ack, O_CLOEXEC) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(command[1]);
      ::close(ack[0]);
      for (const Step& step : steps) {
        char c = 0;
        if (::read(command[0], &c, 1) != 1) ::_exit(0);
        step();
        if (::write(ack[1], "k", 1) != 1) ::_exit(1);
      }
      char c = 0;
      while (::read(command[0], &c, 1) == 1) {
      }
      ::_exit(0);
    }
    ::close(command[0]);
    ::close(ack[1]);
    command_ = command[1];
    ack_ = ack[0];
  }
  ~SteppedChild() {
    ::close(command_);
    ::close(ack_);
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  SteppedChild(const SteppedChild&) = delete;
  SteppedChild& operator=(const SteppedChild&) = delete;

  pid_t pid() const { return pid_; }
  // Runs the next step; false when the child did not answer within 10 s (a step that execs
  // never answers: the pipes are close-on-exec).
  bool step() {
    if (::write(command_, "s", 1) != 1) return false;
    pollfd p{ack_, POLLIN, 0};
    char c = 0;
    return ::poll(&p, 1, 10000) == 1 && ::read(ack_, &c, 1) == 1;
  }
  void end() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    reaped_ = true;
  }

 private:
  pid_t pid_ = -1;
  int command_ = -1, ack_ = -1;
  bool reaped_ = false;
};

// One byte with room for one descriptor (SCM_RIGHTS).
struct OneDescriptorMessage {
  OneDescriptorMessage() {
    header.msg_iov = &data;
    header.msg_iovlen = 1;
    header.msg_control = control;
    header.msg_controllen = sizeof control;
  }
  char byte = 'x';
  iovec data{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr header{};
};

// Sends `fd` over the Unix socket `socket` (a receiver then holds the open file without
// opening anything). False when it could not be sent.
inline bool send_descriptor(int socket, int fd) {
  OneDescriptorMessage message;
  cmsghdr* header = CMSG_FIRSTHDR(&message.header);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
  return ::sendmsg(socket, &message.header, 0) == 1;
}

// Receives one message and with it the descriptor sent (kept open). False on failure.
inline bool receive_descriptor(int socket) {
  OneDescriptorMessage message;
  return ::recvmsg(socket, &message.header, 0) == 1;
}

}  // namespace gpureap::test
