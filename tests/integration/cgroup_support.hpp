// Cgroups the integration tests create and remove: a cgroup v2 directory of their own (a job's
// cgroup, for kill and reap), and a process put in D state with the cgroup v1 freezer.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kill/cgroup_kill.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {

// A cgroup v2 of our own under the unified hierarchy, emptied and removed at the end.
class OwnCgroup {
 public:
  explicit OwnCgroup(const std::string& name) {
    const auto mount = cgroupfs::cgroup2_mount("/proc");
    if (geteuid() != 0) {
      skip_ = "creating a cgroup needs root";
    } else if (!mount) {
      skip_ = "no cgroup v2 hierarchy mounted";
    } else {
      path_ = *mount + "/gpureap-it-" + name + "-" + std::to_string(getpid());
      if (mkdir(path_.c_str(), 0755) != 0) {
        skip_ = "cannot create " + path_ + ": " + std::strerror(errno);
        path_.clear();
      } else if (access((path_ + "/cgroup.kill").c_str(), W_OK) != 0) {
        skip_ = "this kernel has no cgroup.kill (needs 5.14)";
      }
    }
  }
  ~OwnCgroup() {
    if (path_.empty()) return;
    cgroupfs::write_cgroup_kill(path_);  // test cleanup: whatever is left in it (subtree too)
    for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
      for (int i = 0; i < 200 && rmdir(it->c_str()) != 0; ++i) usleep(10000);
    }
    for (int i = 0; i < 200 && rmdir(path_.c_str()) != 0; ++i) usleep(10000);
  }
  const std::string& skip_reason() const { return skip_; }
  const std::string& path() const { return path_; }
  std::vector<pid_t> pids() const { return cgroupfs::cgroup_subtree_pids(path_); }

  // Forks `/bin/sh -c script` in its own process group, inside this cgroup.
  pid_t start_shell(const std::string& script) const {
    const std::string procs = path_ + "/cgroup.procs";
    const pid_t pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      const int fd = open(procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0 || write(fd, "0", 1) != 1) _exit(3);
      close(fd);
      execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }

  // Moves a running process into this cgroup, or into `dir` below it.
  bool adopt(pid_t pid) const { return adopt_into(path_, pid); }
  static bool adopt_into(const std::string& dir, pid_t pid) {
    std::ofstream procs(dir + "/cgroup.procs");
    procs << pid;
    procs.flush();
    return procs.good();
  }
  // Creates path()/relative, each level in turn (removed again at the end); returns it.
  std::string make_child(const std::string& relative) {
    std::string dir = path_;
    std::size_t start = 0;
    while (start < relative.size()) {
      const auto slash = relative.find('/', start);
      dir += "/" + relative.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      if (mkdir(dir.c_str(), 0755) == 0) children_.push_back(dir);
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    return dir;
  }

 private:
  std::string path_;
  std::string skip_;
  std::vector<std::string> children_;  // created below path_, outermost first
};


// Puts a process in D with the cgroup v1 freezer, and thaws it at the end. why_not says why
// it cannot here (for GTEST_SKIP).
struct FrozenInD {
  std::string group, why_not;
  explicit FrozenInD(pid_t pid) {
    if (!running_as_root()) {
      why_not = "needs root to create a cgroup v1 freezer group";
      return;
    }
    const std::string freezer = "/sys/fs/cgroup/freezer";
    struct stat info {};
    if (::stat((freezer + "/cgroup.procs").c_str(), &info) != 0) {
      why_not = "no cgroup v1 freezer at " + freezer +
                " (cgroup v2's freezer stops tasks in an interruptible sleep, not D)";
      return;
    }
    group = freezer + "/gpureap-doctor-" + std::to_string(::getpid());
    if (::mkdir(group.c_str(), 0755) != 0) {
      why_not = "cannot create " + group;
      group.clear();
      return;
    }
    std::ofstream(group + "/cgroup.procs") << pid;
    std::ofstream(group + "/freezer.state") << "FROZEN";
    frozen = pid;
  }
  ~FrozenInD() {
    if (group.empty()) return;
    std::ofstream(group + "/freezer.state") << "THAWED";
    // Back to the root group, so that the group can go while the process still lives.
    std::ofstream("/sys/fs/cgroup/freezer/cgroup.procs") << frozen;
    for (int i = 0; i < 50 && ::rmdir(group.c_str()) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_t frozen = -1;
};

}  // namespace gpureap::test
