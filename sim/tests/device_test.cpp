// Initialization, identity, telemetry, faults and the lost/no-permission states.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

#include "harness.hpp"

namespace gpusim::test {
namespace {

class Device : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2", "--minors", "3,5"}).exit_status, 0); }
  TempDir dir;
};

TEST(Init, DriverNotLoadedWithoutState) {
  Nvml nvml("r550");
  ::unsetenv("GPUSIM_STATE_DIR");
  EXPECT_EQ(nvml.fn<InitFn>("nvmlInit_v2")(), NVML_ERROR_DRIVER_NOT_LOADED);
  TempDir empty;
  EXPECT_EQ(nvml.init(empty.path()), NVML_ERROR_DRIVER_NOT_LOADED);
}

TEST(Init, CallsBeforeInitAreUninitialized) {
  Nvml nvml("r470");
  unsigned count = 0;
  EXPECT_EQ(nvml.fn<CountFn>("nvmlDeviceGetCount_v2")(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml.shutdown(), NVML_ERROR_UNINITIALIZED);
  char buf[80];
  EXPECT_EQ(nvml.fn<SystemStringFn>("nvmlSystemGetDriverVersion")(buf, sizeof buf), NVML_ERROR_UNINITIALIZED);
}

TEST_F(Device, InitIsRefcounted) {
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  ASSERT_EQ(nvml.fn<InitWithFlagsFn>("nvmlInitWithFlags")(0), NVML_SUCCESS);
  EXPECT_EQ(nvml.shutdown(), NVML_SUCCESS);
  unsigned count = 0;
  EXPECT_EQ(nvml.fn<CountFn>("nvmlDeviceGetCount_v2")(&count), NVML_SUCCESS) << "still one reference";
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(nvml.shutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml.fn<CountFn>("nvmlDeviceGetCount_v2")(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml.shutdown(), NVML_ERROR_UNINITIALIZED);
}

TEST_F(Device, InjectedInitFailure) {
  ASSERT_EQ(ctl(dir.path(), {"fault", "--call", "nvmlInit", "--code", "18"}).exit_status, 0);
  Nvml nvml("r550");
  EXPECT_EQ(nvml.init(dir.path()), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_EQ(nvml.fn<InitFn>("nvmlInit")(), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_EQ(nvml.fn<InitWithFlagsFn>("nvmlInitWithFlags")(0), NVML_ERROR_LIB_RM_VERSION_MISMATCH);
  EXPECT_STREQ(nvml.fn<ErrorStringFn>("nvmlErrorString")(18), "RM has detected an NVML/RM version mismatch.");
  ASSERT_EQ(ctl(dir.path(), {"fault", "--clear"}).exit_status, 0);
  EXPECT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
}

TEST_F(Device, NoGpusNeedsTheFlag) {
  TempDir none;
  ASSERT_EQ(ctl(none.path(), {"init", "--gpus", "0"}).exit_status, 0);
  Nvml nvml("r550");
  EXPECT_EQ(nvml.init(none.path()), NVML_ERROR_DRIVER_NOT_LOADED);
  ASSERT_EQ(nvml.fn<InitWithFlagsFn>("nvmlInitWithFlags")(NVML_INIT_FLAG_NO_GPUS), NVML_SUCCESS);
  unsigned count = 7;
  ASSERT_EQ(nvml.fn<CountFn>("nvmlDeviceGetCount_v2")(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
}

TEST_F(Device, Identity) {
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  nvmlDevice_t d1 = nvml.device(1);
  nvmlDevice_t again = nullptr;
  ASSERT_EQ(nvml.fn<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2")(1, &again), NVML_SUCCESS);
  EXPECT_EQ(d1, again) << "handles are stable";
  EXPECT_EQ(nvml.fn<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2")(2, &again), NVML_ERROR_INVALID_ARGUMENT);

  char buf[96];
  ASSERT_EQ(nvml.fn<StringFn>("nvmlDeviceGetName")(d1, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(nvml.fn<StringFn>("nvmlDeviceGetName")(d1, buf, 8), NVML_ERROR_INSUFFICIENT_SIZE);
  ASSERT_EQ(nvml.fn<StringFn>("nvmlDeviceGetUUID")(d1, buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "GPU-5b3f0c01-0000-4000-8000-000000000001");
  nvmlDevice_t by_uuid = nullptr;
  ASSERT_EQ(nvml.fn<HandleByUuidFn>("nvmlDeviceGetHandleByUUID")(buf, &by_uuid), NVML_SUCCESS);
  EXPECT_EQ(by_uuid, d1);
  EXPECT_EQ(nvml.fn<HandleByUuidFn>("nvmlDeviceGetHandleByUUID")("GPU-nope", &by_uuid), NVML_ERROR_NOT_FOUND);

  unsigned v = 99;
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetIndex")(d1, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 1u);
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetMinorNumber")(d1, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 5u);

  // v3: 68 bytes, nothing beyond.
  unsigned char raw[68 + 16];
  std::memset(raw, 0xAA, sizeof raw);
  ASSERT_EQ(nvml.fn<PciV3Fn>("nvmlDeviceGetPciInfo_v3")(d1, reinterpret_cast<nvmlPciInfo_t*>(raw)), NVML_SUCCESS);
  for (std::size_t i = 68; i < sizeof raw; ++i) ASSERT_EQ(raw[i], 0xAA) << "byte " << i;
  nvmlPciInfo_t pci;
  std::memcpy(&pci, raw, sizeof pci);
  EXPECT_STREQ(pci.busId, "00000000:2A:00.0");
  EXPECT_STREQ(pci.busIdLegacy, "0000:2A:00.0");
  EXPECT_EQ(pci.domain, 0u);
  EXPECT_EQ(pci.bus, 0x2Au);
  EXPECT_EQ(pci.device, 0u);
  EXPECT_EQ(pci.pciDeviceId & 0xFFFFu, 0x10DEu);

  // v2: the old 52-byte layout.
  std::memset(raw, 0xAA, sizeof raw);
  ASSERT_EQ(nvml.fn<PciV2Fn>("nvmlDeviceGetPciInfo_v2")(d1, reinterpret_cast<nvmlPciInfo_v2_t*>(raw)), NVML_SUCCESS);
  for (std::size_t i = 52; i < sizeof raw; ++i) ASSERT_EQ(raw[i], 0xAA) << "byte " << i;
  nvmlPciInfo_v2_t pci2;
  std::memcpy(&pci2, raw, sizeof pci2);
  EXPECT_STREQ(pci2.busId, "0000:2A:00.0");
  EXPECT_EQ(pci2.bus, 0x2Au);
}

TEST_F(Device, InvalidHandlesAndPointers) {
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  unsigned v = 0;
  int not_a_device = 0;
  auto* index = nvml.fn<UintFn>("nvmlDeviceGetIndex");
  EXPECT_EQ(index(nullptr, &v), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(index(reinterpret_cast<nvmlDevice_t>(&not_a_device), &v), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(index(reinterpret_cast<nvmlDevice_t>(reinterpret_cast<char*>(nvml.device(0)) + 1), &v),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(index(nvml.device(0), nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml.fn<MemoryFn>("nvmlDeviceGetMemoryInfo")(nvml.device(0), nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml.fn<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2")(0, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml.fn<CountFn>("nvmlDeviceGetCount_v2")(nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(Device, MemoryV2ChecksItsVersion) {
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  auto* mem = nvml.fn<MemoryV2Fn>("nvmlDeviceGetMemoryInfo_v2");
  nvmlMemory_v2_t m{};
  m.version = 2;  // what nvtop writes
  EXPECT_EQ(mem(nvml.device(0), &m), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  m.version = 0;
  EXPECT_EQ(mem(nvml.device(0), &m), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  m.version = nvmlMemory_v2;
  ASSERT_EQ(mem(nvml.device(0), &m), NVML_SUCCESS);
  EXPECT_EQ(m.version, nvmlMemory_v2);
  EXPECT_EQ(m.total, 80 * GiB);
  EXPECT_EQ(m.free, 80 * GiB - 512 * MiB);
}

TEST_F(Device, LostGpu) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "lost=1"}).exit_status, 0);
  Nvml nvml("r550");
  ::setenv("GPUSIM_STATE_DIR", dir.path().c_str(), 1);
  EXPECT_EQ(nvml.fn<InitFn>("nvmlInit")(), NVML_ERROR_GPU_IS_LOST) << "the v1 init attaches every GPU";
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  nvmlDevice_t lost = nvml.device(1);  // the handle is still handed out
  ASSERT_NE(lost, nullptr);
  nvmlMemory_t m;
  EXPECT_EQ(nvml.memory_v1(lost, &m), NVML_ERROR_GPU_IS_LOST);
  unsigned temp = 0;
  EXPECT_EQ(nvml.fn<TemperatureFn>("nvmlDeviceGetTemperature")(lost, NVML_TEMPERATURE_GPU, &temp),
            NVML_ERROR_GPU_IS_LOST);
  unsigned count = 0;
  EXPECT_EQ(nvml.fn<ProcessListFn>("nvmlDeviceGetComputeRunningProcesses_v3")(lost, &count, nullptr),
            NVML_ERROR_GPU_IS_LOST);
  char uuid[96];
  EXPECT_EQ(nvml.fn<StringFn>("nvmlDeviceGetUUID")(lost, uuid, sizeof uuid), NVML_SUCCESS) << "identity stays";
  EXPECT_EQ(nvml.memory_v1(nvml.device(0), &m), NVML_SUCCESS) << "other GPUs are fine";

  // The state follows the config while initialised.
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "lost=0"}).exit_status, 0);
  EXPECT_EQ(nvml.memory_v1(lost, &m), NVML_SUCCESS);
}

TEST_F(Device, NoPermission) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "0", "no_permission=1"}).exit_status, 0);
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  unsigned count = 0;
  ASSERT_EQ(nvml.fn<CountFn>("nvmlDeviceGetCount_v2")(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
  nvmlDevice_t d = nullptr;
  EXPECT_EQ(nvml.fn<HandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2")(0, &d), NVML_ERROR_NO_PERMISSION);
  // The legacy calls only see what they can open.
  ASSERT_EQ(nvml.fn<CountFn>("nvmlDeviceGetCount")(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 1u);
  ASSERT_EQ(nvml.fn<HandleByIndexFn>("nvmlDeviceGetHandleByIndex")(0, &d), NVML_SUCCESS);
  unsigned index = 9;
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetIndex")(d, &index), NVML_SUCCESS);
  EXPECT_EQ(index, 1u);
}

TEST_F(Device, FaultsPerGpuAndPerCall) {
  ASSERT_EQ(ctl(dir.path(), {"fault", "--call", "nvmlDeviceGetMemoryInfo", "--code", "15", "--gpu", "1"}).exit_status, 0);
  ASSERT_EQ(ctl(dir.path(), {"fault", "--call", "nvmlDeviceGetTemperature", "--code", "3"}).exit_status, 0);
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  nvmlMemory_t m;
  nvmlMemory_v2_t m2;
  EXPECT_EQ(nvml.memory_v1(nvml.device(0), &m), NVML_SUCCESS);
  EXPECT_EQ(nvml.memory_v1(nvml.device(1), &m), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml.memory_v2(nvml.device(1), &m2), NVML_ERROR_GPU_IS_LOST) << "versioned variants too";
  unsigned t;
  EXPECT_EQ(nvml.fn<TemperatureFn>("nvmlDeviceGetTemperature")(nvml.device(0), NVML_TEMPERATURE_GPU, &t),
            NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(ctl(dir.path(), {"fault", "--clear", "--call", "nvmlDeviceGetTemperature"}).exit_status, 0);
  EXPECT_EQ(nvml.fn<TemperatureFn>("nvmlDeviceGetTemperature")(nvml.device(0), NVML_TEMPERATURE_GPU, &t),
            NVML_SUCCESS);
  EXPECT_EQ(nvml.memory_v1(nvml.device(1), &m), NVML_ERROR_GPU_IS_LOST);
}

TEST_F(Device, AHangingFaultBlocksTheCallForItsTimeThenFails) {
  ASSERT_EQ(ctl(dir.path(), {"fault", "--call", "nvmlDeviceGetTemperature", "--code", "10", "--gpu", "1", "--hang-ms",
                             "300"})
                .exit_status,
            0);
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  unsigned t = 0;
  const auto temperature = nvml.fn<TemperatureFn>("nvmlDeviceGetTemperature");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(temperature(nvml.device(1), NVML_TEMPERATURE_GPU, &t), NVML_ERROR_TIMEOUT);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(300));
  const auto status = ctl(dir.path(), {"status", "--json"});
  EXPECT_EQ(nlohmann::json::parse(status.out)["faults"][0]["hang_ms"], 300);
}

TEST_F(Device, Telemetry) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "0", "temperature=71", "power_mw=312500", "util_gpu=55", "util_mem=20",
                             "persistence=0", "compute_mode=3", "name=NVIDIA A100-SXM4-40GB"})
                .exit_status,
            0);
  Nvml nvml("r535_54");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  nvmlDevice_t d = nvml.device(0);
  unsigned v = 0;
  ASSERT_EQ(nvml.fn<TemperatureFn>("nvmlDeviceGetTemperature")(d, NVML_TEMPERATURE_GPU, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 71u);
  EXPECT_EQ(nvml.fn<TemperatureFn>("nvmlDeviceGetTemperature")(d, 5, &v), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetPowerUsage")(d, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 312500u);
  nvmlUtilization_t u{};
  ASSERT_EQ(nvml.fn<UtilizationFn>("nvmlDeviceGetUtilizationRates")(d, &u), NVML_SUCCESS);
  EXPECT_EQ(u.gpu, 55u);
  EXPECT_EQ(u.memory, 20u);
  nvmlEnableState_t pm = 1;
  ASSERT_EQ(nvml.fn<EnableStateFn>("nvmlDeviceGetPersistenceMode")(d, &pm), NVML_SUCCESS);
  EXPECT_EQ(pm, NVML_FEATURE_DISABLED);
  nvmlComputeMode_t cm = 0;
  ASSERT_EQ(nvml.fn<ComputeModeFn>("nvmlDeviceGetComputeMode")(d, &cm), NVML_SUCCESS);
  EXPECT_EQ(cm, NVML_COMPUTEMODE_EXCLUSIVE_PROCESS);
  char name[96];
  ASSERT_EQ(nvml.fn<StringFn>("nvmlDeviceGetName")(d, name, sizeof name), NVML_SUCCESS);
  EXPECT_STREQ(name, "NVIDIA A100-SXM4-40GB");
  nvmlConfComputeMemSizeInfo_t cc{};
  ASSERT_EQ(nvml.fn<ConfComputeFn>("nvmlDeviceGetConfComputeMemSizeInfo")(d, &cc), NVML_SUCCESS);
  EXPECT_EQ(cc.protectedMemSizeKib, 0u);
  EXPECT_EQ(cc.unprotectedMemSizeKib, 80 * GiB / 1024);
}

TEST(ErrorString, EveryCodeHasText) {
  Nvml nvml("r450");
  auto* str = nvml.fn<ErrorStringFn>("nvmlErrorString");
  EXPECT_STREQ(str(NVML_SUCCESS), "Success");
  EXPECT_STREQ(str(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
  EXPECT_STREQ(str(NVML_ERROR_INSUFFICIENT_SIZE), "Insufficient Size");
  EXPECT_STREQ(str(NVML_ERROR_UNKNOWN), "Unknown Error");
  EXPECT_STREQ(str(12345), "Unknown Error");
  for (int code = 1; code <= 29; ++code) {
    EXPECT_STRNE(str(code), "Unknown Error") << code;
  }
}

}  // namespace
}  // namespace gpusim::test
