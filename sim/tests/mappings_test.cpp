// Which driver library a simulated process maps, as gpureap sees it in /proc/<pid>/maps: a CUDA
// application and its forked workers map libcuda.so.1; an NVML client maps libnvidia-ml.so.1
// and not libcuda, and its device descriptors are the ones that library opened.
#include <gtest/gtest.h>

#include <cstdlib>

#include "harness.hpp"

namespace gpusim::test {
namespace {

bool maps_contain(unsigned pid, const std::string& text) {
  return memory_maps(pid).find(text) != std::string::npos;
}

class Mappings : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("GPUSIM_NVML_LIBRARY");
    ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2"}).exit_status, 0);
  }
  void TearDown() override { ::unsetenv("GPUSIM_NVML_LIBRARY"); }
  std::string dev(const std::string& name) const { return dir.path() + "/dev/" + name; }
  TempDir dir;
};

TEST_F(Mappings, CudaProcessAndItsWorkersMapLibcuda) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--workers", "1"}, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_TRUE(maps_contain(p->pid(), GPUSIM_LIBCUDA_PATH));
  EXPECT_TRUE(maps_contain(p->pid(), "/libcuda.so.1"));
  EXPECT_FALSE(maps_contain(p->pid(), "libnvidia-ml.so.1")) << "a CUDA program does not load NVML";
  // A DataLoader-style worker inherits the mapping with everything else.
  EXPECT_TRUE(maps_contain(p->workers().at(0), "/libcuda.so.1"));
}

TEST_F(Mappings, NvmlClientMapsNvmlNotLibcuda) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--nvml-client"}, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_TRUE(maps_contain(p->pid(), "/libnvidia-ml.so.1"));
  EXPECT_TRUE(maps_contain(p->pid(), driver_path("r550"))) << "the default generation";
  EXPECT_FALSE(maps_contain(p->pid(), "libcuda"));
  auto files = open_files(p->pid());
  EXPECT_TRUE(files.count(dev("nvidiactl")));
  EXPECT_TRUE(files.count(dev("nvidia0")));
  EXPECT_TRUE(files.count(dev("nvidia1")));
  EXPECT_FALSE(files.count(dev("nvidia-uvm")));
}

TEST_F(Mappings, NvmlClientLoadsTheConfiguredGeneration) {
  ::setenv("GPUSIM_NVML_LIBRARY", driver_path("r450").c_str(), 1);
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--nvml-client"}, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_TRUE(maps_contain(p->pid(), driver_path("r450")));
  EXPECT_FALSE(maps_contain(p->pid(), driver_path("r550")));
}

TEST_F(Mappings, NvmlClientSkipsGpusItMayNotOpen) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "no_permission=1"}).exit_status, 0);
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--nvml-client"}, &err);
  ASSERT_TRUE(p) << err;
  auto files = open_files(p->pid());
  EXPECT_TRUE(files.count(dev("nvidia0")));
  EXPECT_FALSE(files.count(dev("nvidia1")));
}

TEST_F(Mappings, NvmlClientWithoutItsLibraryFails) {
  ::setenv("GPUSIM_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  std::string err;
  int status = 0;
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--nvml-client"}, &err, &status));
  EXPECT_EQ(status, 1);
  EXPECT_NE(err.find("cannot load NVML"), std::string::npos) << err;
}

TEST_F(Mappings, BystanderMapsNeither) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {}, &err);
  ASSERT_TRUE(p) << err;
  EXPECT_FALSE(maps_contain(p->pid(), "libcuda"));
  EXPECT_FALSE(maps_contain(p->pid(), "libnvidia-ml"));
}

}  // namespace
}  // namespace gpusim::test
