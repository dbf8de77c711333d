// nvidia-smi -r as root: refused while persistence mode is on, while any process (a CUDA
// program, an orphaned worker, an NVML client) has the GPU's device file open, or when the GPU
// is lost; otherwise it drops the GPU's allocations like `gpusim reset`.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>

#include "harness.hpp"

namespace gpusim::test {
namespace {

using nlohmann::json;

const std::string kInUse =
    "The following GPUs could not be reset:\n  GPU 00000000:17:00.0: In use by another client\n\n"
    "1 device is currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
    "application, graphics application such as an X server, or a monitoring application such as "
    "another instance of nvidia-smi). Please first kill all processes using this device and all "
    "compute applications running in the system.\n";

class SmiReset : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "nvidia-smi -r needs root; the non-root refusal is Smi.ResetNeedsRoot";
    ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2"}).exit_status, 0);
    ::setenv("GPUSIM_STATE_DIR", dir.path().c_str(), 1);
  }
  CommandResult reset(std::vector<std::string> args) {
    args.insert(args.begin(), GPUSIM_SMI_BINARY);
    return run_command(args);
  }
  std::size_t allocations() {
    return json::parse(ctl(dir.path(), {"status", "--json"}).out)["allocations"].size();
  }
  TempDir dir;
};

TEST_F(SmiReset, RefusedWhilePersistenceModeIsOn) {
  auto r = reset({"-r", "-i", "0"});  // `gpusim init` turns persistence on, as on most servers
  EXPECT_EQ(r.exit_status, 255);
  EXPECT_EQ(r.out, kInUse);
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "0", "persistence=0"}).exit_status, 0);
  r = reset({"-r", "-i", "0"});
  EXPECT_EQ(r.exit_status, 0) << r.out;
  EXPECT_EQ(r.out, "GPU 00000000:17:00.0 was successfully reset.\nAll done.\n");
}

TEST_F(SmiReset, RefusedWhileAnyProcessHoldsTheDevice) {
  for (unsigned g : {0u, 1u}) ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", std::to_string(g), "persistence=0"}).exit_status, 0);
  std::string err;
  auto job = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--workers", "1", "--leak"}, &err);
  ASSERT_TRUE(job) << err;
  auto r = reset({"--gpu-reset", "-i", "0"});
  EXPECT_EQ(r.exit_status, 255);
  EXPECT_EQ(r.out, kInUse);
  EXPECT_EQ(reset({"-i", "1", "-r"}).exit_status, 0) << "another GPU's holders do not matter";

  job->signal_owner(SIGKILL);
  EXPECT_EQ(reset({"-r", "-i", "0"}).exit_status, 255) << "the orphaned worker still holds it";
  job->kill_workers();
  {
    auto monitor = SimProcess::start(dir.path(), {"--nvml-client"}, &err);
    ASSERT_TRUE(monitor) << err;
    EXPECT_EQ(reset({"-r", "-i", "0"}).exit_status, 255) << "an NVML client is a client";
  }
  EXPECT_EQ(allocations(), 1u) << "the leaked context outlived its holders";
  r = reset({"-r", "-i", "GPU-5b3f0c00-0000-4000-8000-000000000000"});
  EXPECT_EQ(r.exit_status, 0) << r.out;
  EXPECT_EQ(r.out, "GPU 00000000:17:00.0 was successfully reset.\nAll done.\n");
  EXPECT_EQ(allocations(), 0u);
}

TEST_F(SmiReset, AllGpusAllOrNothing) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "persistence=0"}).exit_status, 0);
  auto r = reset({"-r"});
  EXPECT_EQ(r.exit_status, 255) << "GPU 0 is still in persistence mode";
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "0", "persistence=0"}).exit_status, 0);
  r = reset({"-r"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_EQ(r.out, "GPU 00000000:17:00.0 was successfully reset.\nGPU 00000000:2A:00.0 was successfully reset.\nAll done.\n");
}

TEST_F(SmiReset, LostGpuCannotBeReset) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "0", "lost=1", "persistence=0"}).exit_status, 0);
  auto r = reset({"-r", "-i", "0"});
  EXPECT_EQ(r.exit_status, 15);
  EXPECT_EQ(r.out, "The following GPUs could not be reset:\n  GPU 00000000:17:00.0: GPU is lost\n");
}

}  // namespace
}  // namespace gpusim::test
