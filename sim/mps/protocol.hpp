// What the simulated MPS control daemon, its servers and its clients say to each other, and
// where they meet. Every conversation is over AF_UNIX SOCK_SEQPACKET sockets, so one send is
// one message and a descriptor handed over with a message never arrives beside another.
//
// The pipe and log directories follow NVIDIA's documented variables (docs/simulator.md, MPS):
// CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps) holds what the real daemon creates there
// (measured on Debian's nvidia-cuda-mps 535.261.03 and 550.163.01): the sockets `control`
// (0666) and `control_privileged` (0755), the file `control_lock` (0666), the FIFO `log`, and
// from R550 on `nvidia-cuda-mps-control.pid` (0666); CUDA_MPS_LOG_DIRECTORY (default
// /var/log/nvidia-mps) holds control.log and server.log.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace gpusim::mps {

struct Dirs {
  std::string pipe;
  std::string log;
};
Dirs dirs_from_env();

inline std::string control_socket(const std::string& pipe_dir) { return pipe_dir + "/control"; }
inline std::string privileged_socket(const std::string& pipe_dir) { return pipe_dir + "/control_privileged"; }
inline std::string control_lock(const std::string& pipe_dir) { return pipe_dir + "/control_lock"; }
inline std::string log_fifo(const std::string& pipe_dir) { return pipe_dir + "/log"; }
inline std::string pid_file(const std::string& pipe_dir) { return pipe_dir + "/nvidia-cuda-mps-control.pid"; }
inline std::string control_log(const std::string& log_dir) { return log_dir + "/control.log"; }
inline std::string server_log(const std::string& log_dir) { return log_dir + "/server.log"; }

// A connected SOCK_SEQPACKET socket to `path` (close-on-exec), or -1 with errno set.
int connect_to(const std::string& path);

// Sends one message, with `pass_fd` attached when >= 0. False when the peer is gone.
bool send_msg(int sock, const std::string& text, int pass_fd = -1);

// Receives one message (at most 64 KiB); nullopt on EOF, error or when `timeout_ms` (>= 0)
// passes. An attached descriptor lands in *passed_fd (close-on-exec), else it is closed.
std::optional<std::string> recv_msg(int sock, int timeout_ms, int* passed_fd = nullptr);

// The peer's host PID and UID as the kernel recorded them at connect().
struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};
std::optional<Peer> peer_of(int sock);

std::vector<std::string> words(const std::string& line);

// Appends "[YYYY-MM-DD HH:MM:SS.mmm] text\n" to the log open at `fd` (O_APPEND). Errors are
// ignored: a log that cannot be written never stops the daemon or a server.
void append_log(int fd, const std::string& text);

}  // namespace gpusim::mps
