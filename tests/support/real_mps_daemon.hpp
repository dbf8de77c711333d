// NVIDIA's real MPS control daemon for a test, from Debian's nvidia-cuda-mps as
// scripts/fetch-nvidia-mps.sh unpacks it (<dir>/535, <dir>/550; <dir> is $GPUREAP_NVIDIA_MPS_DIR,
// else the build's GPUREAP_NVIDIA_MPS_DIR). Both versions start without a GPU or a driver.
// `nvidia-cuda-mps-control -d` runs with CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY in
// a directory of the test's, as root or as a given user; the constructor waits for its control
// socket and finds its PID (R535 writes no pid file: the process of that binary whose
// environment names this pipe directory). The destructor sends `quit` and kills what is left.
// Plain C++ and POSIX, no test framework.
#pragma once

#include <sys/types.h>

#include <string>

namespace gpureap::test {

// The directory of one version's unpacked package ("" and `why` when it is not there).
std::string real_mps_package(int major, std::string& why);

class RealMpsDaemon {
 public:
  // Starts the daemon of `package` (real_mps_package) with its directories under `work_dir`
  // (created, owned by uid:gid). running() says whether it came up; error() why not.
  RealMpsDaemon(const std::string& package, const std::string& work_dir, uid_t uid, gid_t gid);
  ~RealMpsDaemon();
  RealMpsDaemon(const RealMpsDaemon&) = delete;
  RealMpsDaemon& operator=(const RealMpsDaemon&) = delete;

  bool running() const;
  const std::string& error() const { return error_; }
  pid_t pid() const { return pid_; }
  std::string control_program() const { return package_ + "/usr/bin/nvidia-cuda-mps-control"; }
  std::string pipe() const { return work_dir_ + "/pipe"; }
  std::string log() const { return work_dir_ + "/log"; }
  // One line through the front end, run as the daemon's user: what it printed (stdout and
  // stderr), or "" when it could not run.
  std::string command(const std::string& line) const;
  // `quit`, then true once the daemon has exited.
  bool quit();

 private:
  std::string package_;
  std::string work_dir_;
  uid_t uid_;
  gid_t gid_;
  pid_t pid_ = -1;
  std::string error_;
};

}  // namespace gpureap::test
