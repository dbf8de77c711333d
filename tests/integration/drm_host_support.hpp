// What the DRM integration tests share besides the simulated DRM driver (SimHost::add_drm_gpu,
// start_drm_client): an AMD GPU laid out by hand as a static sysfs tree (GPUREAP_SYS_DIR, nodes in
// the simulator's dev dir), for tests that write fdinfo themselves (a value the driver cannot
// produce); and NodeHolder, a real process holding a node with a bare open(), which the driver
// gives no fdinfo (a holder whose stats cannot be read). Do not mix lay_out_amd_gpu with
// add_drm_gpu on one host: the running driver owns $STATE/fdinfo and removes files it did not write.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sim_harness.hpp"

namespace gpureap::test {

inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// An amdgpu GPU at `pci` with 16 GiB of VRAM, 2.125 GiB used, and these DRM nodes (name, minor)
// in the host's sysfs tree and dev dir.
inline void lay_out_amd_gpu(const SimHost& host, const std::string& pci,
                            const std::vector<std::pair<std::string, int>>& nodes) {
  namespace fs = std::filesystem;
  const std::string sys = host.state_dir() + "/sys";
  write_file(sys + "/devices/" + pci + "/uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=" + pci + "\n");
  write_file(sys + "/devices/" + pci + "/vendor", "0x1002\n");
  write_file(sys + "/devices/" + pci + "/mem_info_vram_total", "17163091968\n");
  write_file(sys + "/devices/" + pci + "/mem_info_vram_used", "2281701376\n");
  for (const auto& [node, minor] : nodes) {
    write_file(sys + "/class/drm/" + node + "/dev", "226:" + std::to_string(minor) + "\n");
    fs::create_directory_symlink(sys + "/devices/" + pci, sys + "/class/drm/" + node + "/device");
    write_file(host.dev_dir() + "/dri/" + node, "");
  }
}

// A process holding `node` open (as `uid` when given), and optionally a worker it forked that
// inherits the descriptor; both pause until killed on destruction.
struct NodeHolder {
  pid_t pid = -1;
  pid_t worker = -1;
  int fd = -1;
  NodeHolder(const std::string& node, bool with_worker, std::optional<uid_t> uid = std::nullopt) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::close(pipe_fds[0]);
      ::setpgid(0, 0);
      const int held = ::open(node.c_str(), O_RDONLY);
      if (uid && (::setgid(*uid) != 0 || ::setuid(*uid) != 0)) ::_exit(3);
      pid_t child = -1;
      if (with_worker && (child = ::fork()) == 0) {
        ::pause();
        ::_exit(0);
      }
      const std::string line = std::to_string(held) + " " + std::to_string(child) + "\n";
      (void)!::write(pipe_fds[1], line.data(), line.size());
      ::pause();
      ::_exit(0);
    }
    ::close(pipe_fds[1]);
    std::string got;
    char c;
    while (::read(pipe_fds[0], &c, 1) == 1 && c != '\n') got += c;
    ::close(pipe_fds[0]);
    std::istringstream(got) >> fd >> worker;
  }
  ~NodeHolder() {
    if (worker > 0) ::kill(worker, SIGKILL);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  NodeHolder(const NodeHolder&) = delete;
  NodeHolder& operator=(const NodeHolder&) = delete;
};

}  // namespace gpureap::test
