// A descriptor's /proc link names a path, and a process can open a file of its own at the same
// path in a mount namespace of its own (an unprivileged user can mount a tmpfs in one and hand
// the descriptor to anyone). gpureap takes a descriptor for a GPU's device file only when the
// file it has open is that node, and has it open: a forged one, or one that only names the node
// (O_PATH), makes no holder, orphan or target.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(ForgedDevicePath, AFileAtTheNodesPathInAnotherMountNamespaceHoldsNoGpu) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: a mount namespace of its own";
  if (run_command({"/usr/bin/unshare", "-m", "/bin/true"}).exit_code != 0) {
    GTEST_SKIP() << "unshare -m is not allowed here";
  }
  SimHost host({"--gpus", "1"});
  const std::string dev = std::filesystem::canonical(host.dev_dir()).string();
  const std::string mnt = host.state_dir() + "/forge";
  std::filesystem::create_directories(mnt);
  // In its own mount namespace: a directory of its own holding a plain file `nvidia0`, bound
  // over the simulator's dev dir, the file held open: its link reads <dev>/nvidia0 from here.
  const std::string script = ": > \"$1/nvidia0\" && mount --bind \"$1\" \"$2\" && "
                             "exec 3<\"$2/nvidia0\" && echo ready && exec sleep 60";
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t forger = ::fork();
  if (forger == 0) {
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::execl("/usr/bin/unshare", "unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script.c_str(), "forger",
            mnt.c_str(), dev.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  ASSERT_EQ(line, "ready");
  const std::string link = std::filesystem::read_symlink("/proc/" + std::to_string(forger) + "/fd/3").string();
  EXPECT_EQ(link, dev + "/nvidia0") << "the forged file's link does not read as the node's path";
  auto real = host.start({"--alloc", "0:1GiB"});

  const auto ps = host.ps_json();
  EXPECT_EQ(find_holder(ps, forger), nullptr) << ps.dump(2);
  EXPECT_NE(find_process(ps, real.pid, 0), nullptr) << ps.dump(2);
  int rc = -1;
  const auto plan = host.gpureap_json({"kill", "--holders", "--dry-run", "--json"}, &rc);
  EXPECT_EQ(kill_target(plan, forger), nullptr) << plan.dump(2);
  ::kill(forger, SIGKILL);
  ::waitpid(forger, nullptr, 0);
}

// A process that opens `path` with `flags` and waits, left by its job: it is forked by a process
// that leads a group of its own and exits once the descriptor is open, so the holder's group
// leader is gone (an orphan's proof). Its PID, or -1.
pid_t hold_open_orphaned(const std::string& path, int flags) {
  int ready[2];
  if (::pipe(ready) != 0) return -1;
  const pid_t leader = ::fork();
  if (leader == 0) {
    ::setpgid(0, 0);
    const pid_t holder = ::fork();
    if (holder == 0) {
      if (::open(path.c_str(), flags) < 0) ::_exit(1);
      const pid_t self = ::getpid();
      (void)!::write(ready[1], &self, sizeof self);
      ::pause();
      ::_exit(0);
    }
    ::_exit(holder > 0 ? 0 : 1);
  }
  ::close(ready[1]);
  pid_t holder = -1;
  if (::read(ready[0], &holder, sizeof holder) != static_cast<ssize_t>(sizeof holder)) holder = -1;
  ::close(ready[0]);
  ::waitpid(leader, nullptr, 0);
  return holder;
}

// An O_PATH descriptor names the node without opening it: the driver never sees it, so it holds
// no GPU, blocks no reset and makes no target, though its link and its file are the node's. Any
// user can make one. An open with access mode 3 (neither read nor write: ioctl only) does open
// the device, and its link's mode looks the same: it is a holder, here an orphan kill ends.
TEST(ForgedDevicePath, ADescriptorOpenedWithOPathOnlyNamesTheNodeAndHoldsNoGpu) {
  SimHost host({"--gpus", "1"});
  const std::string node = host.dev_dir() + "/nvidia0";
  const pid_t path_only = hold_open_orphaned(node, O_PATH | O_CLOEXEC);
  const pid_t ioctl_only = hold_open_orphaned(node, 3 | O_CLOEXEC);
  ASSERT_GT(path_only, 0);
  ASSERT_GT(ioctl_only, 0);
  auto real = host.start({"--alloc", "0:1GiB"});

  const auto ps = host.ps_json();
  EXPECT_EQ(find_holder(ps, path_only), nullptr) << ps.dump(2);
  EXPECT_NE(find_holder(ps, ioctl_only), nullptr) << ps.dump(2);
  EXPECT_NE(find_process(ps, real.pid, 0), nullptr) << ps.dump(2);
  int rc = -1;
  const auto plan = host.gpureap_json({"kill", "--holders", "--dry-run", "--json"}, &rc);
  EXPECT_EQ(kill_target(plan, path_only), nullptr) << plan.dump(2);
  EXPECT_NE(kill_target(plan, ioctl_only), nullptr) << plan.dump(2);
  for (const pid_t holder : {path_only, ioctl_only}) {
    ::kill(holder, SIGKILL);
    ::waitpid(holder, nullptr, 0);
  }
}

}  // namespace
}  // namespace gpureap::test
