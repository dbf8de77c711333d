// A descriptor's /proc link names a path, and a process can open a file of its own at the same
// path in a mount namespace of its own (an unprivileged user can mount a tmpfs in one and hand
// the descriptor to anyone). gpureap takes a descriptor for a GPU's device file only when the
// file it has open is that node: a forged one makes no holder, an orphan or a target.
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

}  // namespace
}  // namespace gpureap::test
