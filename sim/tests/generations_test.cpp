// Each simulated driver generation exports exactly its driver's symbols and writes process
// records at that driver's stride (nvml-facts.md §4).
#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "harness.hpp"

namespace gpusim::test {
namespace {

struct GenExpect {
  std::string gen;
  std::string driver_version;
  std::string nvml_version;
  int cuda_version;
  bool v2, mps, v3, memory_v2, conf_compute, detail_list;
  std::size_t v3_stride;
};

const std::vector<GenExpect>& expectations() {
  static const std::vector<GenExpect> e = {
      {"r450", "450.51.06", "11.450.51.06", 11000, false, false, false, false, false, false, 0},
      {"r470", "470.82.01", "11.470.82.01", 11040, true, true, false, false, false, false, 0},
      {"r535_54", "535.54.03", "12.535.54.03", 12020, true, true, true, true, true, false, 32},
      {"r535_98", "535.98", "12.535.98", 12020, true, true, false, true, true, false, 0},
      {"r550", "550.54.15", "12.550.54.15", 12040, true, true, true, true, true, true, 24},
      {"quirk32", "550.127.08", "12.550.127.08", 12040, true, true, true, true, false, false, 32},
  };
  return e;
}

class Generation : public ::testing::TestWithParam<GenExpect> {};

TEST_P(Generation, ExportsExactlyItsSymbols) {
  const GenExpect& g = GetParam();
  Nvml nvml(g.gen);
  ASSERT_TRUE(nvml.loaded()) << nvml.load_error();
  for (const char* s : {"nvmlInit", "nvmlInit_v2", "nvmlInitWithFlags", "nvmlShutdown", "nvmlErrorString",
                        "nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion",
                        "nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2",
                        "nvmlSystemGetProcessName", "nvmlDeviceGetCount", "nvmlDeviceGetCount_v2",
                        "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByUUID",
                        "nvmlDeviceGetIndex", "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo_v2",
                        "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetMinorNumber", "nvmlDeviceGetMemoryInfo",
                        "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage",
                        "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetComputeMode",
                        "nvmlDeviceGetProcessUtilization", "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
                        "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetGpuInstanceId",
                        "nvmlDeviceGetComputeInstanceId", "nvmlDeviceIsMigDeviceHandle",
                        "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", "nvmlDeviceGetComputeRunningProcesses",
                        "nvmlDeviceGetGraphicsRunningProcesses"}) {
    EXPECT_TRUE(nvml.has(s)) << g.gen << " must export " << s;
  }
  auto expect = [&](const char* s, bool present) {
    EXPECT_EQ(nvml.has(s), present) << g.gen << (present ? " must export " : " must not export ") << s;
  };
  expect("nvmlDeviceGetComputeRunningProcesses_v2", g.v2);
  expect("nvmlDeviceGetGraphicsRunningProcesses_v2", g.v2);
  expect("nvmlDeviceGetMPSComputeRunningProcesses", g.mps);
  expect("nvmlDeviceGetMPSComputeRunningProcesses_v2", g.mps);
  expect("nvmlDeviceGetComputeRunningProcesses_v3", g.v3);
  expect("nvmlDeviceGetGraphicsRunningProcesses_v3", g.v3);
  expect("nvmlDeviceGetMPSComputeRunningProcesses_v3", g.v3);
  expect("nvmlDeviceGetMemoryInfo_v2", g.memory_v2);
  expect("nvmlDeviceGetConfComputeMemSizeInfo", g.conf_compute);
  expect("nvmlDeviceGetRunningProcessDetailList", g.detail_list);
  // Nothing of the implementation leaks out.
  expect("nvmlDeviceGetPciInfo", false);
  expect("_ZN6gpusim11load_configERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE", false);
}

TEST_P(Generation, ReportsItsVersions) {
  const GenExpect& g = GetParam();
  TempDir dir;
  ASSERT_EQ(ctl(dir.path(), {"init"}).exit_status, 0);
  Nvml nvml(g.gen);
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
  ASSERT_EQ(nvml.fn<SystemStringFn>("nvmlSystemGetDriverVersion")(buf, sizeof buf), NVML_SUCCESS);
  EXPECT_EQ(std::string(buf), g.driver_version);
  ASSERT_EQ(nvml.fn<SystemStringFn>("nvmlSystemGetNVMLVersion")(buf, sizeof buf), NVML_SUCCESS);
  EXPECT_EQ(std::string(buf), g.nvml_version);
  EXPECT_EQ(nvml.fn<SystemStringFn>("nvmlSystemGetDriverVersion")(buf, 4), NVML_ERROR_INSUFFICIENT_SIZE);
  int cuda = 0;
  ASSERT_EQ(nvml.fn<IntOutFn>("nvmlSystemGetCudaDriverVersion_v2")(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, g.cuda_version);
  ASSERT_EQ(nvml.fn<IntOutFn>("nvmlSystemGetCudaDriverVersion")(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, g.cuda_version);
}

// Two processes on GPU 0; every exported list symbol must write records of its stride,
// no more and no less, and the fields must read back at that stride.
TEST_P(Generation, WritesRecordsAtTheSymbolsStride) {
  const GenExpect& g = GetParam();
  TempDir dir;
  ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "1"}).exit_status, 0);
  std::string err;
  auto a = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err);
  ASSERT_TRUE(a) << err;
  auto b = SimProcess::start(dir.path(), {"--alloc", "0:3GiB"}, &err);
  ASSERT_TRUE(b) << err;
  Nvml nvml(g.gen);
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  nvmlDevice_t dev = nvml.device(0);

  std::vector<std::pair<std::string, std::size_t>> symbols = {{"nvmlDeviceGetComputeRunningProcesses", 16}};
  if (g.v2) symbols.push_back({"nvmlDeviceGetComputeRunningProcesses_v2", 24});
  if (g.v3) symbols.push_back({"nvmlDeviceGetComputeRunningProcesses_v3", g.v3_stride});
  for (const auto& [sym, stride] : symbols) {
    SCOPED_TRACE(g.gen + " " + sym);
    auto* f = nvml.fn<ProcessListFn>(sym.c_str());
    ASSERT_NE(f, nullptr);
    std::vector<unsigned char> buf(8 * 32, 0xAA);
    unsigned count = 8;
    ASSERT_EQ(f(dev, &count, buf.data()), NVML_SUCCESS);
    ASSERT_EQ(count, 2u);
    // The sentinel probe of nvitop PR #226: bytes written / count = stride.
    std::size_t last_written = 0;
    for (std::size_t i = 0; i < buf.size(); ++i) {
      if (buf[i] != 0xAA) last_written = i + 1;
    }
    EXPECT_EQ(last_written, 2 * stride);
    std::set<unsigned> pids;
    std::set<unsigned long long> mems;
    for (unsigned i = 0; i < count; ++i) {
      const unsigned char* rec = buf.data() + i * stride;
      unsigned pid;
      unsigned long long used;
      std::memcpy(&pid, rec + offsetof(nvmlProcessInfo_v1_t, pid), sizeof pid);
      std::memcpy(&used, rec + offsetof(nvmlProcessInfo_v1_t, usedGpuMemory), sizeof used);
      pids.insert(pid);
      mems.insert(used);
      if (stride >= 24) {
        unsigned gi, ci;
        std::memcpy(&gi, rec + offsetof(nvmlProcessInfo_v2_t, gpuInstanceId), sizeof gi);
        std::memcpy(&ci, rec + offsetof(nvmlProcessInfo_v2_t, computeInstanceId), sizeof ci);
        EXPECT_EQ(gi, NVML_INVALID_INSTANCE_ID);
        EXPECT_EQ(ci, NVML_INVALID_INSTANCE_ID);
      }
      if (stride == 32) {
        unsigned long long cc;
        std::memcpy(&cc, rec + offsetof(nvmlProcessDetail_v1_t, usedGpuCcProtectedMemory), sizeof cc);
        EXPECT_EQ(cc, 0u);
      }
    }
    EXPECT_EQ(pids, (std::set<unsigned>{a->pid(), b->pid()}));
    EXPECT_EQ(mems, (std::set<unsigned long long>{1 * GiB, 3 * GiB}));
  }
}

INSTANTIATE_TEST_SUITE_P(AllGenerations, Generation, ::testing::ValuesIn(expectations()),
                         [](const ::testing::TestParamInfo<GenExpect>& p) { return p.param.gen; });

// A 24-byte reader on the 32-byte quirk driver gets shuffled fields: the bug the probe exists for.
TEST(GenerationQuirk, TwentyFourByteReaderMisreadsQuirk32) {
  TempDir dir;
  ASSERT_EQ(ctl(dir.path(), {"init"}).exit_status, 0);
  std::string err;
  auto a = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err);
  ASSERT_TRUE(a) << err;
  auto b = SimProcess::start(dir.path(), {"--alloc", "0:2GiB"}, &err);
  ASSERT_TRUE(b) << err;
  Nvml nvml("quirk32");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  std::vector<nvmlProcessDetail_v1_t> recs;
  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", nvml.device(0), 24, &recs), NVML_SUCCESS);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_NE(recs[1].pid, b->pid()) << "the second record must be misaligned for a 24-byte reader";
  ASSERT_EQ(nvml.processes("nvmlDeviceGetComputeRunningProcesses_v3", nvml.device(0), 32, &recs), NVML_SUCCESS);
  EXPECT_EQ(recs[0].pid, a->pid());
  EXPECT_EQ(recs[1].pid, b->pid());
}

}  // namespace
}  // namespace gpusim::test
