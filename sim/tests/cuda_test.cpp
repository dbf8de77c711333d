// gpusim-cuda as the product will see it: PID namespaces, names, signals, zombies, NVML
// clients, descriptors, and the errors a CUDA program would hit.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <set>
#include <thread>

#include "common/file_io.hpp"
#include "harness.hpp"

namespace gpusim::test {
namespace {

using namespace std::chrono_literals;

class Cuda : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2"}).exit_status, 0); }
  std::string dev(const std::string& name) { return dir.path() + "/dev/" + name; }
  TempDir dir;
};

TEST_F(Cuda, HoldsDeviceFilesLikeCuda) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "1:1GiB", "--workers", "1"}, &err);
  ASSERT_TRUE(p) << err;
  auto files = open_files(p->pid());
  EXPECT_TRUE(files.count(dev("nvidiactl")));
  EXPECT_TRUE(files.count(dev("nvidia-uvm")));
  EXPECT_TRUE(files.count(dev("nvidia1")));
  EXPECT_FALSE(files.count(dev("nvidia0"))) << "only GPUs it allocates on";
  // The worker inherited the very same descriptors.
  auto wfiles = open_files(p->workers().at(0));
  EXPECT_TRUE(wfiles.count(dev("nvidiactl")));
  EXPECT_TRUE(wfiles.count(dev("nvidia1")));
}

// allocs/.lock is made 0666 in one step, whatever its maker's umask: a second user's program
// that opened it while it still had its maker's mode failed to allocate (two users' jobs
// starting together on one Slurm node).
TEST_F(Cuda, TheAllocationLockIsEveryUsersFromItsCreation) {
  if (::geteuid() != 0 || ::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs root and setpriv";
  ::chmod(dir.path().c_str(), 0755);
  std::string err;
  auto first = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err, nullptr,
                                 {"/bin/sh", "-c", "umask 077 && exec \"$@\"", "sh"});
  ASSERT_TRUE(first) << err;
  struct stat lock {};
  ASSERT_EQ(::stat((dir.path() + "/allocs/.lock").c_str(), &lock), 0);
  EXPECT_EQ(lock.st_mode & 07777, 0666u);
  auto names = list_dir_entries(dir.path() + "/allocs");
  ASSERT_TRUE(names.ok());
  for (const DirEntry& e : *names) {
    EXPECT_TRUE(e.name[0] != '.' || e.name == ".lock") << "a temporary left: " << e.name;
  }
  // Another user's program allocates through it.
  ::chmod((dir.path() + "/allocs").c_str(), 01777);
  auto second = SimProcess::start(dir.path(), {"--alloc", "1:1GiB"}, &err, nullptr,
                                  {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"});
  EXPECT_TRUE(second) << err;
}

TEST_F(Cuda, NvmlClientHoldsDevicesButNoMemory) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--nvml-client"}, &err);
  ASSERT_TRUE(p) << err;
  auto files = open_files(p->pid());
  EXPECT_TRUE(files.count(dev("nvidiactl")));
  EXPECT_TRUE(files.count(dev("nvidia0")));
  EXPECT_TRUE(files.count(dev("nvidia1")));
  EXPECT_FALSE(files.count(dev("nvidia-uvm")));
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  std::vector<nvmlProcessDetail_v1_t> recs;
  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", nvml.device(0), 24, &recs), NVML_SUCCESS);
  EXPECT_TRUE(recs.empty());
  nvmlMemory_v2_t m;
  ASSERT_EQ(nvml.memory_v2(nvml.device(0), &m), NVML_SUCCESS);
  EXPECT_EQ(m.used, 0u);
}

TEST_F(Cuda, PidNamespaceRecordsTheHostPid) {
  std::string err;
  int status = 0;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--pidns"}, &err, &status);
  if (!p && status == 4) GTEST_SKIP() << "unshare(CLONE_NEWPID) is not permitted here: " << err;
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->nspid(), 1u) << "the owner is PID 1 of its namespace";
  EXPECT_NE(p->pid(), 1u);
  EXPECT_NE(static_cast<pid_t>(p->pid()), p->launcher());
  EXPECT_TRUE(process_running(static_cast<pid_t>(p->pid())));
  ReadResult status_file = read_file("/proc/" + std::to_string(p->pid()) + "/status");
  ASSERT_TRUE(status_file.ok());
  EXPECT_NE(status_file.data.find("NSpid:\t" + std::to_string(p->pid()) + "\t1\n"), std::string::npos)
      << status_file.data;

  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  std::vector<nvmlProcessDetail_v1_t> recs;
  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", nvml.device(0), 24, &recs), NVML_SUCCESS);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].pid, p->pid()) << "the driver reports host PIDs";

  // SIGTERM to the launcher is forwarded into the namespace; both end cleanly.
  ::kill(p->launcher(), SIGTERM);
  EXPECT_EQ(p->wait_exit(3s), 0);
  nvmlMemory_v2_t m;
  ASSERT_TRUE(eventually([&] { return nvml.memory_v2(nvml.device(0), &m) == NVML_SUCCESS && m.used == 0; }));
}

TEST_F(Cuda, NameSetsCommAndArgv0) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--name", "/usr/bin/python3"}, &err);
  ASSERT_TRUE(p) << err;
  std::string base = "/proc/" + std::to_string(p->pid());
  EXPECT_EQ(read_file(base + "/comm").data, "python3\n");
  std::string cmdline = read_file(base + "/cmdline").data;
  EXPECT_EQ(cmdline.substr(0, cmdline.find('\0')), "/usr/bin/python3");

  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  char name[64];
  ASSERT_EQ(nvml.fn<ProcessNameFn>("nvmlSystemGetProcessName")(p->pid(), name, sizeof name), NVML_SUCCESS);
  EXPECT_STREQ(name, "/usr/bin/python3");
  ASSERT_EQ(nvml.fn<ProcessNameFn>("nvmlSystemGetProcessName")(p->pid(), name, 5), NVML_SUCCESS);
  EXPECT_STREQ(name, "/usr");
}

TEST_F(Cuda, ZombieChildStaysUnreaped) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--zombie-child"}, &err);
  ASSERT_TRUE(p) << err;
  std::string children = read_file("/proc/" + std::to_string(p->pid()) + "/task/" +
                                   std::to_string(p->pid()) + "/children").data;
  ASSERT_FALSE(children.empty());
  unsigned child = static_cast<unsigned>(std::stoul(children));
  ASSERT_TRUE(eventually([&] {
    std::string stat = read_file("/proc/" + std::to_string(child) + "/stat").data;
    auto paren = stat.rfind(')');
    return paren != std::string::npos && stat[paren + 2] == 'Z';
  }));
}

TEST_F(Cuda, SigtermPolicies) {
  std::string err;
  auto exiting = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err);
  ASSERT_TRUE(exiting) << err;
  exiting->signal_owner(SIGTERM);
  EXPECT_EQ(exiting->wait_exit(3s), 0) << "SIGTERM ends it cleanly";

  auto stubborn = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--on-sigterm", "ignore"}, &err);
  ASSERT_TRUE(stubborn) << err;
  stubborn->signal_owner(SIGTERM);
  EXPECT_EQ(stubborn->wait_exit(300ms), std::nullopt);
  EXPECT_TRUE(process_running(static_cast<pid_t>(stubborn->pid())));
  stubborn->signal_owner(SIGKILL);
  EXPECT_EQ(stubborn->wait_exit(3s), 128 + SIGKILL);

  auto slow = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--on-sigterm", "slow:400"}, &err);
  ASSERT_TRUE(slow) << err;
  auto t0 = std::chrono::steady_clock::now();
  slow->signal_owner(SIGTERM);
  EXPECT_EQ(slow->wait_exit(150ms), std::nullopt);
  EXPECT_EQ(slow->wait_exit(3s), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 350ms);
}

TEST_F(Cuda, WorkersFollowTheirSigtermPolicy) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--workers", "2", "--workers-on-sigterm", "ignore"},
                             &err);
  ASSERT_TRUE(p) << err;
  for (unsigned w : p->workers()) ::kill(static_cast<pid_t>(w), SIGTERM);
  std::this_thread::sleep_for(200ms);
  for (unsigned w : p->workers()) EXPECT_TRUE(process_running(static_cast<pid_t>(w)));

  auto q = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--workers", "1"}, &err);
  ASSERT_TRUE(q) << err;
  ::kill(static_cast<pid_t>(q->workers().at(0)), SIGTERM);
  EXPECT_TRUE(eventually([&] { return !process_running(static_cast<pid_t>(q->workers().at(0))); }));
}

TEST_F(Cuda, OutOfMemoryFailsLikeCuda) {
  std::string err;
  int status = 0;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:79GiB", "--alloc", "0:1GiB"}, &err, &status);
  EXPECT_FALSE(p);
  EXPECT_EQ(status, 3);
  EXPECT_NE(err.find("out of memory"), std::string::npos) << err;
  // Nothing was allocated by the failed attempt.
  auto ok = SimProcess::start(dir.path(), {"--alloc", "0:79GiB"}, &err, &status);
  EXPECT_TRUE(ok) << err;
}

TEST_F(Cuda, RejectsBadRequests) {
  std::string err;
  int status = 0;
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--alloc", "7:1GiB"}, &err, &status));
  EXPECT_EQ(status, 1);
  EXPECT_NE(err.find("no such GPU"), std::string::npos) << err;
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--alloc", "0:lots"}, &err, &status));
  EXPECT_EQ(status, 2);
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--alloc", "0:1GiB:X"}, &err, &status));
  EXPECT_EQ(status, 2);
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--alloc", "0:1GiB:C:1"}, &err, &status));
  EXPECT_EQ(status, 1);
  EXPECT_NE(err.find("not in MIG mode"), std::string::npos) << err;
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--on-sigterm", "later"}, &err, &status));
  EXPECT_EQ(status, 2);
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--workers-at-exit", "sometimes"}, &err, &status));
  EXPECT_EQ(status, 2);
  // A join of workers that ignore SIGTERM would never end.
  EXPECT_FALSE(SimProcess::start(
      dir.path(), {"--workers", "1", "--workers-on-sigterm", "ignore", "--workers-at-exit", "join"}, &err, &status));
  EXPECT_EQ(status, 2);
  EXPECT_NE(err.find("--workers-at-exit join"), std::string::npos) << err;
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "lost=1"}).exit_status, 0);
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--alloc", "1:1GiB"}, &err, &status));
  EXPECT_EQ(status, 1);
  EXPECT_NE(err.find("lost"), std::string::npos) << err;
  TempDir empty;
  EXPECT_FALSE(SimProcess::start(empty.path(), {"--alloc", "0:1GiB"}, &err, &status));
  EXPECT_EQ(status, 1);
  EXPECT_NE(err.find("gpusim init"), std::string::npos) << err;
}

}  // namespace
}  // namespace gpusim::test
