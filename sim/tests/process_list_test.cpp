// The process-list calls: the two-call protocol, aggregation per process, the three process
// kinds, unavailable memory, the detail list and per-process utilization samples.
#include <gtest/gtest.h>

#include <cstring>
#include <ctime>

#include "harness.hpp"

namespace gpusim::test {
namespace {

class ProcessList : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2"}).exit_status, 0); }
  TempDir dir;
};

TEST_F(ProcessList, TwoCallProtocol) {
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  nvmlDevice_t dev = nvml.device(0);
  auto* list = nvml.fn<ProcessListFn>("nvmlDeviceGetComputeRunningProcesses_v3");

  // No process: the sizing call succeeds with 0.
  unsigned count = 0;
  EXPECT_EQ(list(dev, &count, nullptr), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(list(dev, nullptr, nullptr), NVML_ERROR_INVALID_ARGUMENT);

  std::string err;
  auto a = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err);
  ASSERT_TRUE(a) << err;
  auto b = SimProcess::start(dir.path(), {"--alloc", "0:2GiB"}, &err);
  ASSERT_TRUE(b) << err;

  count = 0;
  EXPECT_EQ(list(dev, &count, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 2u);

  // Too small: the required count comes back and nothing is written.
  std::vector<unsigned char> buf(10 * 24, 0xAA);
  count = 1;
  EXPECT_EQ(list(dev, &count, buf.data()), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 2u);
  for (unsigned char c : buf) ASSERT_EQ(c, 0xAA);

  count = 10;
  EXPECT_EQ(list(dev, &count, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  count = 10;
  ASSERT_EQ(list(dev, &count, buf.data()), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);

  // Other GPUs are not involved.
  count = 0;
  EXPECT_EQ(list(nvml.device(1), &count, nullptr), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
}

TEST_F(ProcessList, OneRecordPerProcessAndKind) {
  std::string err;
  auto p = SimProcess::start(dir.path(),
                             {"--alloc", "0:1GiB", "--alloc", "0:512MiB", "--alloc", "0:256MiB:G",
                              "--alloc", "1:2GiB:M"},
                             &err);
  ASSERT_TRUE(p) << err;
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  std::vector<nvmlProcessDetail_v1_t> recs;

  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", nvml.device(0), 24, &recs), NVML_SUCCESS);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].pid, p->pid());
  // The process's whole usage on the device, in each list it appears in.
  EXPECT_EQ(recs[0].usedGpuMemory, 1 * GiB + 512 * MiB + 256 * MiB);

  ASSERT_EQ(nvml.processes("nvmlDeviceGetGraphicsRunningProcesses_v3", nvml.device(0), 24, &recs), NVML_SUCCESS);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].usedGpuMemory, 1 * GiB + 512 * MiB + 256 * MiB);

  ASSERT_EQ(nvml.processes("nvmlDeviceGetMPSComputeRunningProcesses_v3", nvml.device(0), 24, &recs), NVML_SUCCESS);
  EXPECT_TRUE(recs.empty());
  ASSERT_EQ(nvml.processes("nvmlDeviceGetMPSComputeRunningProcesses_v3", nvml.device(1), 24, &recs), NVML_SUCCESS);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].usedGpuMemory, 2 * GiB);
  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", nvml.device(1), 24, &recs), NVML_SUCCESS);
  EXPECT_TRUE(recs.empty());
}

TEST_F(ProcessList, MemoryNotAvailableReadsAllOnes) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "0", "memory_not_available=1"}).exit_status, 0);
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err);
  ASSERT_TRUE(p) << err;
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  std::vector<nvmlProcessDetail_v1_t> recs;
  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses", nvml.device(0), 16, &recs), NVML_SUCCESS);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].pid, p->pid());
  EXPECT_EQ(recs[0].usedGpuMemory, NVML_VALUE_NOT_AVAILABLE_ULL);
  // The device's memory figures still count it.
  nvmlMemory_v2_t mem;
  ASSERT_EQ(nvml.memory_v2(nvml.device(0), &mem), NVML_SUCCESS);
  EXPECT_EQ(mem.used, 1 * GiB);
}

TEST_F(ProcessList, DetailList) {
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--alloc", "0:64MiB:G"}, &err);
  ASSERT_TRUE(p) << err;
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  auto* detail = nvml.fn<DetailListFn>("nvmlDeviceGetRunningProcessDetailList");
  ASSERT_NE(detail, nullptr);
  nvmlDevice_t dev = nvml.device(0);

  nvmlProcessDetailList_v1_t list{};
  EXPECT_EQ(detail(dev, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  list.version = 1;  // not NVML_STRUCT_VERSION
  EXPECT_EQ(detail(dev, &list), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

  list.version = nvmlProcessDetailList_v1;
  list.mode = NVML_PROCESS_MODE_COMPUTE;
  list.numProcArrayEntries = 0;
  list.procArray = nullptr;
  EXPECT_EQ(detail(dev, &list), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(list.numProcArrayEntries, 1u);

  std::vector<nvmlProcessDetail_v1_t> arr(4);
  std::memset(arr.data(), 0xAA, arr.size() * sizeof arr[0]);
  list.procArray = arr.data();
  list.numProcArrayEntries = 4;
  ASSERT_EQ(detail(dev, &list), NVML_SUCCESS);
  ASSERT_EQ(list.numProcArrayEntries, 1u);
  EXPECT_EQ(arr[0].pid, p->pid());
  EXPECT_EQ(arr[0].usedGpuMemory, 1 * GiB + 64 * MiB);  // per process, not per kind
  EXPECT_EQ(arr[0].gpuInstanceId, NVML_INVALID_INSTANCE_ID);
  EXPECT_EQ(arr[0].usedGpuCcProtectedMemory, 0u);

  list.mode = NVML_PROCESS_MODE_GRAPHICS;
  list.numProcArrayEntries = 4;
  ASSERT_EQ(detail(dev, &list), NVML_SUCCESS);
  ASSERT_EQ(list.numProcArrayEntries, 1u);
  EXPECT_EQ(arr[0].usedGpuMemory, 1 * GiB + 64 * MiB);

  list.mode = NVML_PROCESS_MODE_MPS;
  list.numProcArrayEntries = 4;
  ASSERT_EQ(detail(dev, &list), NVML_SUCCESS);
  EXPECT_EQ(list.numProcArrayEntries, 0u);

  list.mode = 7;
  EXPECT_EQ(detail(dev, &list), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(ProcessList, ProcessUtilizationSamples) {
  std::string err;
  auto busy = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--sm-util", "40", "--mem-util", "15"}, &err);
  ASSERT_TRUE(busy) << err;
  auto idle = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err);
  ASSERT_TRUE(idle) << err;
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  auto* util = nvml.fn<ProcessUtilFn>("nvmlDeviceGetProcessUtilization");
  nvmlDevice_t dev = nvml.device(0);

  unsigned count = 0;
  EXPECT_EQ(util(dev, nullptr, nullptr, 0), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(util(dev, nullptr, &count, 0), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 1u);  // only the process with non-zero utilization

  nvmlProcessUtilizationSample_t samples[4];
  count = 4;
  ASSERT_EQ(util(dev, samples, &count, 0), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(samples[0].pid, busy->pid());
  EXPECT_EQ(samples[0].smUtil, 40u);
  EXPECT_EQ(samples[0].memUtil, 15u);
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  auto now_us = static_cast<unsigned long long>(now.tv_sec) * 1000000ULL + static_cast<unsigned long long>(now.tv_nsec) / 1000;
  EXPECT_LE(samples[0].timeStamp, now_us);
  EXPECT_GT(samples[0].timeStamp, now_us - 5000000ULL);

  // Only samples newer than lastSeen: none yet (NOT_FOUND), or one from a later period.
  unsigned long long seen = samples[0].timeStamp;
  count = 4;
  nvmlReturn_t rc = util(dev, samples, &count, seen);
  if (rc == NVML_SUCCESS) {
    ASSERT_EQ(count, 1u);
    EXPECT_GT(samples[0].timeStamp, seen);
  } else {
    EXPECT_EQ(rc, NVML_ERROR_NOT_FOUND);
  }
  count = 4;
  EXPECT_EQ(util(dev, samples, &count, now_us + 10000000ULL), NVML_ERROR_NOT_FOUND);
  // A new period brings a new sample.
  ASSERT_TRUE(eventually([&] {
    count = 4;
    return util(dev, samples, &count, seen) == NVML_SUCCESS && samples[0].timeStamp > seen;
  }));

  // Device utilization includes the process's share.
  nvmlUtilization_t u{};
  ASSERT_EQ(nvml.fn<UtilizationFn>("nvmlDeviceGetUtilizationRates")(dev, &u), NVML_SUCCESS);
  EXPECT_EQ(u.gpu, 40u);
  EXPECT_EQ(u.memory, 15u);

  // A dead process stops producing samples.
  busy->signal_owner(SIGKILL);
  count = 4;
  EXPECT_EQ(util(dev, samples, &count, 0), NVML_ERROR_NOT_FOUND);
}

}  // namespace
}  // namespace gpusim::test
