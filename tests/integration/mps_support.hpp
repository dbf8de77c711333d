// A simulated MPS control daemon for a test: its pipe and log directories in a directory of
// root's (reachable by the test user), quit and gone at the end of the test.
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include "sim_harness.hpp"

namespace gpureap::test {

// A directory of root's in /tmp (mode 0755), reached only through directories no other user can
// change, as a host's MPS pipe directory is: gpureap points no MPS front end below a directory
// others may change, and the host's state directory is open to every user. Removed, with all
// in it, at the end.
class RootDirectory {
 public:
  RootDirectory() {
    char templ[] = "/tmp/gpureap-mps-XXXXXX";
    if (::mkdtemp(templ) == nullptr) throw std::runtime_error("mkdtemp");
    path_ = templ;
    std::filesystem::permissions(path_, std::filesystem::perms(0755));
  }
  ~RootDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  RootDirectory(const RootDirectory&) = delete;
  RootDirectory& operator=(const RootDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class MpsDaemon {
 public:
  MpsDaemon(const SimHost& host, const std::string& name) : host_(host), dir_(root_.path() + "/" + name) {
    std::filesystem::create_directories(dir_);
    std::filesystem::permissions(dir_, std::filesystem::perms(0755));
    const auto result = run_command({std::string(GPUSIM_BIN_DIR) + "/nvidia-cuda-mps-control", "-d"}, options());
    error_ = result.err;
    pid_ = std::atoi(read_text_file(pipe() + "/nvidia-cuda-mps-control.pid").c_str());
  }
  ~MpsDaemon() {
    command("quit");
    if (pid_ > 1 && !eventually([&] { return gone(); }, 2000)) {
      ::kill(pid_, SIGKILL);
      eventually([&] { return gone(); }, 2000);
    }
  }
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

  bool running() const { return pid_ > 1 && !gone(); }
  // SIGKILL, as an OOM kill or a stopped container would end it: its pipe files stay.
  void kill_hard() {
    ::kill(pid_, SIGKILL);
    eventually([&] { return gone(); }, 2000);
  }
  const std::string& error() const { return error_; }
  pid_t pid() const { return pid_; }
  std::string pipe() const { return dir_ + "/pipe"; }
  std::string log() const { return dir_ + "/log"; }

  // One command through nvidia-cuda-mps-control's stdin; its answer without the final newline.
  std::string command(const std::string& line) const {
    static std::atomic<int> serial{0};
    const std::string input = dir_ + "/command-" + std::to_string(serial++);
    std::ofstream(input) << line << "\n";
    auto o = options();
    o.stdin_path = input;
    std::string out = run_command({std::string(GPUSIM_BIN_DIR) + "/nvidia-cuda-mps-control"}, o).out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }
  // The one server's PID, or 0.
  pid_t server() const { return std::atoi(command("get_server_list").c_str()); }

 private:
  SpawnOptions options() const {
    SpawnOptions o;
    o.env = host_.env();
    o.env["CUDA_MPS_PIPE_DIRECTORY"] = pipe();
    o.env["CUDA_MPS_LOG_DIRECTORY"] = log();
    return o;
  }

  // Exited: reaped here (the test binary is a subreaper and may be its parent), a zombie, or gone.
  bool gone() const {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return true;
    const std::string stat = read_text_file("/proc/" + std::to_string(pid_) + "/stat");
    const auto paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z';
  }

  const SimHost& host_;
  RootDirectory root_;
  std::string dir_;
  std::string error_;
  pid_t pid_ = -1;
};

}  // namespace gpureap::test
