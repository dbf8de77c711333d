// MIG: enumeration, per-instance process lists and memory, handle relations.
#include <gtest/gtest.h>

#include <unistd.h>

#include <set>

#include "common/file_io.hpp"
#include "harness.hpp"

namespace gpusim::test {
namespace {

class Mig : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2", "--mig", "0:3"}).exit_status, 0);
    ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
    gpu0 = nvml.device(0);
  }
  nvmlDevice_t mig(unsigned slot) {
    nvmlDevice_t h = nullptr;
    EXPECT_EQ(nvml.fn<MigHandleFn>("nvmlDeviceGetMigDeviceHandleByIndex")(gpu0, slot, &h), NVML_SUCCESS);
    return h;
  }
  TempDir dir;
  Nvml nvml{"r550"};
  nvmlDevice_t gpu0 = nullptr;
};

TEST_F(Mig, Enumeration) {
  unsigned cur = 9, pending = 9;
  ASSERT_EQ(nvml.fn<MigModeFn>("nvmlDeviceGetMigMode")(gpu0, &cur, &pending), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_DEVICE_MIG_ENABLE);
  EXPECT_EQ(pending, NVML_DEVICE_MIG_ENABLE);
  ASSERT_EQ(nvml.fn<MigModeFn>("nvmlDeviceGetMigMode")(nvml.device(1), &cur, &pending), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_DEVICE_MIG_DISABLE);

  unsigned max = 0;
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetMaxMigDeviceCount")(gpu0, &max), NVML_SUCCESS);
  EXPECT_EQ(max, 7u);
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetMaxMigDeviceCount")(nvml.device(1), &max), NVML_SUCCESS);
  EXPECT_EQ(max, 0u);

  auto* by_index = nvml.fn<MigHandleFn>("nvmlDeviceGetMigDeviceHandleByIndex");
  std::set<unsigned> gis;
  for (unsigned slot = 0; slot < 7; ++slot) {
    nvmlDevice_t h = nullptr;
    nvmlReturn_t rc = by_index(gpu0, slot, &h);
    if (slot >= 3) {
      EXPECT_EQ(rc, NVML_ERROR_NOT_FOUND) << slot;
      continue;
    }
    ASSERT_EQ(rc, NVML_SUCCESS);
    unsigned is_mig = 0, gi = 0, ci = 9;
    ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceIsMigDeviceHandle")(h, &is_mig), NVML_SUCCESS);
    EXPECT_EQ(is_mig, 1u);
    ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetGpuInstanceId")(h, &gi), NVML_SUCCESS);
    ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetComputeInstanceId")(h, &ci), NVML_SUCCESS);
    EXPECT_EQ(ci, 0u);
    gis.insert(gi);
    nvmlDevice_t parent = nullptr;
    ASSERT_EQ(nvml.fn<ParentHandleFn>("nvmlDeviceGetDeviceHandleFromMigDeviceHandle")(h, &parent), NVML_SUCCESS);
    EXPECT_EQ(parent, gpu0);
    char name[96], uuid[96];
    ASSERT_EQ(nvml.fn<StringFn>("nvmlDeviceGetName")(h, name, sizeof name), NVML_SUCCESS);
    EXPECT_EQ(std::string(name), "NVIDIA H100 80GB HBM3 MIG 2g.26gb");
    ASSERT_EQ(nvml.fn<StringFn>("nvmlDeviceGetUUID")(h, uuid, sizeof uuid), NVML_SUCCESS);
    EXPECT_EQ(std::string(uuid).rfind("MIG-", 0), 0u);
    nvmlDevice_t by_uuid = nullptr;
    ASSERT_EQ(nvml.fn<HandleByUuidFn>("nvmlDeviceGetHandleByUUID")(uuid, &by_uuid), NVML_SUCCESS);
    EXPECT_EQ(by_uuid, h);
  }
  EXPECT_EQ(gis, (std::set<unsigned>{1, 2, 3}));
  EXPECT_EQ(by_index(gpu0, 7, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  nvmlDevice_t h;
  EXPECT_EQ(by_index(gpu0, 7, &h), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(by_index(nvml.device(1), 0, &h), NVML_ERROR_INVALID_ARGUMENT);

  unsigned is_mig = 1, gi = 0;
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceIsMigDeviceHandle")(gpu0, &is_mig), NVML_SUCCESS);
  EXPECT_EQ(is_mig, 0u);
  EXPECT_EQ(nvml.fn<UintFn>("nvmlDeviceGetGpuInstanceId")(gpu0, &gi), NVML_ERROR_NOT_SUPPORTED);
}

TEST_F(Mig, ProcessesAndMemoryPerInstance) {
  std::string err;
  auto a = SimProcess::start(dir.path(), {"--alloc", "0:2GiB:C:1"}, &err);
  ASSERT_TRUE(a) << err;
  auto b = SimProcess::start(dir.path(), {"--alloc", "0:5GiB:C:2"}, &err);
  ASSERT_TRUE(b) << err;
  // The process holds its instance's capability nodes too.
  std::string caps = dir.path() + "/dev/nvidia-caps/";
  auto fds = list_dir("/proc/" + std::to_string(a->pid()) + "/fd");
  ASSERT_TRUE(fds.ok());
  bool holds_cap = false;
  for (const auto& fd : *fds) {
    char buf[4096];
    ssize_t n = ::readlink(("/proc/" + std::to_string(a->pid()) + "/fd/" + fd).c_str(), buf, sizeof buf - 1);
    if (n > 0 && std::string(buf, static_cast<std::size_t>(n)).rfind(caps, 0) == 0) holds_cap = true;
  }
  EXPECT_TRUE(holds_cap);

  std::vector<nvmlProcessDetail_v1_t> recs;
  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", gpu0, 24, &recs), NVML_SUCCESS);
  ASSERT_EQ(recs.size(), 2u) << "the parent handle lists every instance";
  EXPECT_EQ(recs[0].pid, a->pid());
  EXPECT_EQ(recs[0].gpuInstanceId, 1u);
  EXPECT_EQ(recs[0].computeInstanceId, 0u);
  EXPECT_EQ(recs[1].pid, b->pid());
  EXPECT_EQ(recs[1].gpuInstanceId, 2u);

  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", mig(0), 24, &recs), NVML_SUCCESS);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].pid, a->pid());
  EXPECT_EQ(recs[0].usedGpuMemory, 2 * GiB);
  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", mig(1), 24, &recs), NVML_SUCCESS);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].pid, b->pid());
  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", mig(2), 24, &recs), NVML_SUCCESS);
  EXPECT_TRUE(recs.empty());

  nvmlMemory_v2_t m;
  ASSERT_EQ(nvml.memory_v2(mig(1), &m), NVML_SUCCESS);
  EXPECT_EQ(m.used, 5 * GiB);
  EXPECT_EQ(m.total, (80 * GiB / 3) & ~(MiB - 1));
  ASSERT_EQ(nvml.memory_v2(gpu0, &m), NVML_SUCCESS);
  EXPECT_EQ(m.used, 7 * GiB);

  // Not available on MIG: utilization; compute mode needs a MIG handle.
  nvmlUtilization_t u;
  EXPECT_EQ(nvml.fn<UtilizationFn>("nvmlDeviceGetUtilizationRates")(gpu0, &u), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml.fn<UtilizationFn>("nvmlDeviceGetUtilizationRates")(mig(0), &u), NVML_ERROR_NOT_SUPPORTED);
  unsigned count = 0;
  EXPECT_EQ(nvml.fn<ProcessUtilFn>("nvmlDeviceGetProcessUtilization")(gpu0, nullptr, &count, 0),
            NVML_ERROR_NOT_SUPPORTED);
  nvmlComputeMode_t cm;
  EXPECT_EQ(nvml.fn<ComputeModeFn>("nvmlDeviceGetComputeMode")(gpu0, &cm), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml.fn<ComputeModeFn>("nvmlDeviceGetComputeMode")(mig(0), &cm), NVML_SUCCESS);
}

TEST_F(Mig, CudaNeedsAnInstance) {
  std::string err;
  int status = 0;
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err, &status));
  EXPECT_EQ(status, 1);
  EXPECT_NE(err.find("MIG mode"), std::string::npos) << err;
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--alloc", "0:1GiB:C:9"}, &err, &status));
  EXPECT_NE(err.find("no MIG GPU instance 9"), std::string::npos) << err;
  EXPECT_FALSE(SimProcess::start(dir.path(), {"--alloc", "0:30GiB:C:1"}, &err, &status));
  EXPECT_EQ(status, 3) << "an instance holds only its slice";
}

}  // namespace
}  // namespace gpusim::test
