// The simulated MPS programs: one executable installed under two names, as NVIDIA ships
// nvidia-cuda-mps-control (the control daemon and its command front-end) and
// nvidia-cuda-mps-server (one per user, started by the daemon on demand).
#pragma once

namespace gpusim::mps {

// nvidia-cuda-mps-control [-d | -f]: without an option, sends each line of stdin to the
// running daemon as a command and prints its answer.
int control_main(int argc, char** argv);

// nvidia-cuda-mps-server --uid U --gid G --fd N: started only by the daemon, over the
// socket it passes as descriptor N.
int server_main(int argc, char** argv);

// Exit statuses of the front-end and the daemon.
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

}  // namespace gpusim::mps
