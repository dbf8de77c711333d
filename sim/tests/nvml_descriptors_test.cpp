// The simulated libnvidia-ml.so.1 holds device files the way the real one does: nvidiactl from
// nvmlInit* to the matching nvmlShutdown, and a GPU's node once a handle to it was handed out.
// On a real H200 (driver 580.159.04) an NVML client had nvidiactl and nvidia0 open.
#include <gtest/gtest.h>
#include <unistd.h>

#include "harness.hpp"

namespace gpusim::test {
namespace {

class NvmlDescriptors : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2", "--minors", "3,5"}).exit_status, 0);
  }
  std::string dev(const std::string& name) const { return dir.path() + "/dev/" + name; }
  bool held(const std::string& name) const { return open_files(static_cast<unsigned>(::getpid())).count(dev(name)) > 0; }
  TempDir dir;
};

TEST_P(NvmlDescriptors, HeldFromInitToTheMatchingShutdown) {
  Nvml nvml(GetParam());
  ASSERT_TRUE(nvml.loaded()) << nvml.load_error();
  EXPECT_FALSE(held("nvidiactl")) << "loading the library opens nothing";
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  EXPECT_TRUE(held("nvidiactl"));
  EXPECT_FALSE(held("nvidia3")) << "no handle taken yet";
  nvml.device(0);
  EXPECT_TRUE(held("nvidia3")) << "GPU 0 has minor 3";
  EXPECT_FALSE(held("nvidia5"));

  // Reference-counted like real NVML: two inits need two shutdowns.
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  ASSERT_EQ(nvml.shutdown(), NVML_SUCCESS);
  EXPECT_TRUE(held("nvidiactl"));
  EXPECT_TRUE(held("nvidia3"));
  ASSERT_EQ(nvml.shutdown(), NVML_SUCCESS);
  EXPECT_FALSE(held("nvidiactl"));
  EXPECT_FALSE(held("nvidia3"));

  // A new session starts from nothing again.
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  EXPECT_TRUE(held("nvidiactl"));
  EXPECT_FALSE(held("nvidia3"));
}

TEST_P(NvmlDescriptors, EveryHandleReturningCallOpensTheGpu) {
  Nvml nvml(GetParam());
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  ASSERT_EQ(nvml.fn<HandleByIndexFn>("nvmlDeviceGetHandleByIndex")(1, &dev), NVML_SUCCESS);
  EXPECT_TRUE(held("nvidia5"));
  EXPECT_FALSE(held("nvidia3"));
  std::string uuid = "GPU-5b3f0c00-0000-4000-8000-000000000000";
  ASSERT_EQ(nvml.fn<HandleByUuidFn>("nvmlDeviceGetHandleByUUID")(uuid.c_str(), &dev), NVML_SUCCESS);
  EXPECT_TRUE(held("nvidia3"));
}

TEST_P(NvmlDescriptors, RefusedHandlesOpenNothing) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "no_permission=1"}).exit_status, 0);
  Nvml nvml(GetParam());
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  nvmlDevice_t dev = nullptr;
  EXPECT_EQ(nvml.fn<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2")(1, &dev), NVML_ERROR_NO_PERMISSION);
  EXPECT_EQ(nvml.fn<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2")(7, &dev), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_FALSE(held("nvidia5"));
  EXPECT_TRUE(held("nvidiactl"));
}

INSTANTIATE_TEST_SUITE_P(Generations, NvmlDescriptors, ::testing::ValuesIn(all_generations()),
                         [](const auto& param_info) { return param_info.param; });

TEST(NvmlDescriptorsMig, MigHandlesHoldTheParentGpu) {
  TempDir dir;
  ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2", "--mig", "1:2"}).exit_status, 0);
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  std::string mig_uuid = "MIG-5b3f0c01-0001-4000-8000-000000000011";
  nvmlDevice_t mig = nullptr;
  ASSERT_EQ(nvml.fn<HandleByUuidFn>("nvmlDeviceGetHandleByUUID")(mig_uuid.c_str(), &mig), NVML_SUCCESS);
  EXPECT_TRUE(open_files(static_cast<unsigned>(::getpid())).count(dir.path() + "/dev/nvidia1"));
}

// An NVML client is a holder like any other: a reset has to wait for it.
TEST(NvmlDescriptorsReset, AnNvmlClientBlocksGpusimReset) {
  TempDir dir;
  ASSERT_EQ(ctl(dir.path(), {"init"}).exit_status, 0);
  {
    Nvml nvml("r550");
    ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
    nvml.device(0);
    auto r = ctl(dir.path(), {"reset", "--gpu", "0"});
    EXPECT_EQ(r.exit_status, 1);
    EXPECT_NE(r.err.find(std::to_string(::getpid())), std::string::npos) << r.err;
  }
  EXPECT_EQ(ctl(dir.path(), {"reset", "--gpu", "0"}).exit_status, 0) << "shutdown closed the descriptors";
}

}  // namespace
}  // namespace gpusim::test
