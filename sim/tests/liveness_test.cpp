// Driver semantics of context lifetime with real processes: inherited descriptors keep memory
// alive without a listed owner, release takes the configured delay, leaks stay.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "harness.hpp"

namespace gpusim::test {
namespace {

using namespace std::chrono_literals;

class Liveness : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(ctl(dir.path(), {"init"}).exit_status, 0);
    ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
    dev = nvml.device(0);
  }
  unsigned long long used() {
    nvmlMemory_v2_t m;
    EXPECT_EQ(nvml.memory_v2(dev, &m), NVML_SUCCESS);
    return m.used;
  }
  std::size_t listed() {
    std::vector<nvmlProcessDetail_v1_t> recs;
    EXPECT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", dev, 24, &recs), NVML_SUCCESS);
    return recs.size();
  }
  TempDir dir;
  Nvml nvml{"r550"};
  nvmlDevice_t dev = nullptr;
};

TEST_F(Liveness, OwnerAliveIsListedWithItsMemory) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:4GiB"}, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(used(), 4 * GiB);
  EXPECT_EQ(listed(), 1u);
}

TEST_F(Liveness, AllDeadIsFreed) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:4GiB"}, &err);
  ASSERT_TRUE(p) << err;
  p->signal_owner(SIGKILL);
  EXPECT_EQ(used(), 0u);
  EXPECT_EQ(listed(), 0u);
}

// The library keeps allocs/'s listing and each owner file open between calls: an owner seen
// alive and then killed, and a context made after an answer, are in the very next answer.
TEST_F(Liveness, EveryCallAnswersFromNowNotFromTheLastCall) {
  EXPECT_EQ(listed(), 0u);
  std::string err;
  auto first = SimProcess::start(dir.path(), {"--alloc", "0:4GiB"}, &err);
  ASSERT_TRUE(first) << err;
  EXPECT_EQ(listed(), 1u);
  EXPECT_EQ(used(), 4 * GiB);
  auto second = SimProcess::start(dir.path(), {"--alloc", "0:2GiB"}, &err);
  ASSERT_TRUE(second) << err;
  EXPECT_EQ(listed(), 2u);
  EXPECT_EQ(used(), 6 * GiB);
  first->signal_owner(SIGKILL);
  EXPECT_EQ(listed(), 1u);
  EXPECT_EQ(used(), 2 * GiB);
  second->signal_owner(SIGKILL);
  EXPECT_EQ(listed(), 0u);
  EXPECT_EQ(used(), 0u);
}

TEST_F(Liveness, InheritingWorkersKeepMemoryListedUnderTheDeadOwner) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:4GiB", "--workers", "2"}, &err);
  ASSERT_TRUE(p) << err;
  ASSERT_EQ(p->workers().size(), 2u);
  p->signal_owner(SIGKILL);
  for (unsigned w : p->workers()) EXPECT_TRUE(process_running(static_cast<pid_t>(w)));
  // As on a real driver: the dead owner's PID stays listed with the memory its workers keep.
  EXPECT_EQ(listed(), 1u);
  EXPECT_EQ(used(), 4 * GiB);
  // One worker still holds it.
  kill_and_wait(static_cast<pid_t>(p->workers()[0]));
  EXPECT_EQ(used(), 4 * GiB);
  EXPECT_EQ(listed(), 1u);
  kill_and_wait(static_cast<pid_t>(p->workers()[1]));
  EXPECT_EQ(used(), 0u);
  EXPECT_EQ(listed(), 0u);
}

TEST_F(Liveness, DieWithParentWorkersReleaseWithTheOwner) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:4GiB", "--workers", "2", "--worker-mode", "die-with-parent"},
                             &err);
  ASSERT_TRUE(p) << err;
  p->signal_owner(SIGKILL);
  for (unsigned w : p->workers()) {
    EXPECT_TRUE(eventually([&] { return !process_running(static_cast<pid_t>(w)); }));
  }
  EXPECT_TRUE(eventually([&] { return used() == 0; }));
}

// DataLoader's clean exit: the owner ends and reaps its workers before it exits, so none is
// left, not even for an instant, however slowly a worker would notice its parent's death
// (survive mode: it never would).
TEST_F(Liveness, JoinedWorkersAreGoneWhenTheOwnerExitsNormally) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--workers", "2", "--workers-at-exit", "join",
                                          "--exit-after", "100"},
                             &err);
  ASSERT_TRUE(p) << err;
  ASSERT_EQ(p->workers().size(), 2u);
  EXPECT_EQ(p->wait_exit(3s), 0);
  for (unsigned w : p->workers()) EXPECT_FALSE(process_running(static_cast<pid_t>(w))) << w;
  EXPECT_EQ(used(), 0u);
}

TEST_F(Liveness, ReleaseDelayIsHonoured) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:2GiB", "--release-delay", "600"}, &err);
  ASSERT_TRUE(p) << err;
  p->signal_owner(SIGKILL);
  auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(used(), 2 * GiB) << "teardown must not be instant";
  EXPECT_EQ(listed(), 0u);
  ASSERT_TRUE(eventually([&] { return used() == 0; }, 3s));
  EXPECT_GE(std::chrono::steady_clock::now() - killed, 550ms);
}

TEST_F(Liveness, GpuDefaultReleaseDelayApplies) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "0", "release_delay_ms=400"}).exit_status, 0);
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:2GiB"}, &err);
  ASSERT_TRUE(p) << err;
  p->signal_owner(SIGKILL);
  auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(used(), 2 * GiB);
  ASSERT_TRUE(eventually([&] { return used() == 0; }, 3s));
  EXPECT_GE(std::chrono::steady_clock::now() - killed, 350ms);
}

TEST_F(Liveness, LeakIsNeverFreedUntilFreeAll) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:3GiB", "--leak"}, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(listed(), 1u);
  p->signal_owner(SIGKILL);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(used(), 3 * GiB);
  EXPECT_EQ(listed(), 0u);
  ASSERT_EQ(ctl(dir.path(), {"free", "--all"}).exit_status, 0);
  EXPECT_EQ(used(), 0u);
}

TEST_F(Liveness, BaseUsedAndReservedAccounting) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "0", "base_used=1GiB"}).exit_status, 0);
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:2GiB"}, &err);
  ASSERT_TRUE(p) << err;
  nvmlMemory_v2_t v2;
  ASSERT_EQ(nvml.memory_v2(dev, &v2), NVML_SUCCESS);
  EXPECT_EQ(v2.total, 80 * GiB);
  EXPECT_EQ(v2.reserved, 512 * MiB);
  EXPECT_EQ(v2.used, 3 * GiB);
  EXPECT_EQ(v2.free, 80 * GiB - 512 * MiB - 3 * GiB);
  nvmlMemory_t v1;
  ASSERT_EQ(nvml.memory_v1(dev, &v1), NVML_SUCCESS);
  EXPECT_EQ(v1.total, 80 * GiB);
  EXPECT_EQ(v1.used, 3 * GiB + 512 * MiB);
  EXPECT_EQ(v1.free, v1.total - v1.used);
}

TEST_F(Liveness, ExitAfterEndsNormallyAndFrees) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--exit-after", "200"}, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->wait_exit(3s), 0);
  EXPECT_EQ(used(), 0u);
}

}  // namespace
}  // namespace gpusim::test
