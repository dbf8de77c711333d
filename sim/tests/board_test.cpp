// Board telemetry that nvitop and gpustat read: fan, performance state, power limits, ECC,
// video engines, display and driver model (sim/driver/nvml_board.cpp).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.hpp"

namespace gpusim::test {
namespace {

class Board : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2"}).exit_status, 0);
    ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  }
  TempDir dir;
  Nvml nvml{"r550"};
};

TEST_F(Board, H100Defaults) {
  nvmlDevice_t d = nvml.device(0);
  unsigned v = 7;
  EXPECT_EQ(nvml.fn<UintFn>("nvmlDeviceGetFanSpeed")(d, &v), NVML_ERROR_NOT_SUPPORTED) << "an SXM board has no fan";
  nvmlPstates_t p = -1;
  ASSERT_EQ(nvml.fn<PstateFn>("nvmlDeviceGetPerformanceState")(d, &p), NVML_SUCCESS);
  EXPECT_EQ(p, NVML_PSTATE_8) << "idle";
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetPowerManagementLimit")(d, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 700000u);
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetEnforcedPowerLimit")(d, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 700000u);
  nvmlEnableState_t cur = 0, pending = 0;
  ASSERT_EQ(nvml.fn<EnablePairFn>("nvmlDeviceGetEccMode")(d, &cur, &pending), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_FEATURE_ENABLED);
  EXPECT_EQ(pending, NVML_FEATURE_ENABLED);
  auto* ecc = nvml.fn<EccCountFn>("nvmlDeviceGetTotalEccErrors");
  for (int type : {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED}) {
    for (int counter : {NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC}) {
      unsigned long long n = 99;
      ASSERT_EQ(ecc(d, type, counter, &n), NVML_SUCCESS);
      EXPECT_EQ(n, 0u);
    }
  }
  for (const char* sym : {"nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization"}) {
    unsigned util = 9, period = 0;
    ASSERT_EQ(nvml.fn<VideoUtilFn>(sym)(d, &util, &period), NVML_SUCCESS) << sym;
    EXPECT_EQ(util, 0u) << sym;
    EXPECT_GE(period, 1000000u / 6) << sym << ": between 1/6 s and 1 s";
    EXPECT_LE(period, 1000000u) << sym;
  }
  nvmlEnableState_t display = 1;
  ASSERT_EQ(nvml.fn<EnableStateFn>("nvmlDeviceGetDisplayActive")(d, &display), NVML_SUCCESS);
  EXPECT_EQ(display, NVML_FEATURE_DISABLED);
  nvmlDriverModel_t model_cur = -1, model_pending = -1;
  EXPECT_EQ(nvml.fn<DriverModelFn>("nvmlDeviceGetDriverModel")(d, &model_cur, &model_pending),
            NVML_ERROR_NOT_SUPPORTED) << "Windows only";
}

// The library notices a replaced config.json by its name's inotify events
// (common/watched_listing.hpp). A forked child shares the parent's inotify descriptions: had it
// read the event of a change, the parent would answer from the old configuration for good.
TEST_F(Board, AChangeIsSeenByTheParentAfterAForkedChildCalledToo) {
  nvmlDevice_t d = nvml.device(1);
  unsigned v = 0;
  auto* fan_speed = nvml.fn<UintFn>("nvmlDeviceGetFanSpeed");
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "fan_speed=40"}).exit_status, 0);
  ASSERT_EQ(fan_speed(d, &v), NVML_SUCCESS);
  ASSERT_EQ(v, 40u);
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "fan_speed=45"}).exit_status, 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    unsigned seen = 0;
    ::_exit(fan_speed(d, &seen) == NVML_SUCCESS && seen == 45 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child sees the change";
  ASSERT_EQ(fan_speed(d, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 45u) << "and so does the parent";
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "fan_speed=50"}).exit_status, 0);
  ASSERT_EQ(fan_speed(d, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 50u) << "and every later change";
}

TEST_F(Board, ValuesFollowGpusimSet) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "fan_speed=45", "pstate=2", "power_limit_mw=500000",
                             "enforced_power_limit_mw=450000", "ecc_corrected=12", "ecc_uncorrected=3",
                             "util_enc=40", "util_dec=15", "display_active=1"})
                .exit_status,
            0);
  nvmlDevice_t d = nvml.device(1);
  unsigned v = 0;
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetFanSpeed")(d, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 45u);
  nvmlPstates_t p = -1;
  ASSERT_EQ(nvml.fn<PstateFn>("nvmlDeviceGetPerformanceState")(d, &p), NVML_SUCCESS);
  EXPECT_EQ(p, 2);
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetPowerManagementLimit")(d, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 500000u);
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetEnforcedPowerLimit")(d, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 450000u) << "the lowest limiter wins";
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "power_limit_mw=300000"}).exit_status, 0);
  ASSERT_EQ(nvml.fn<UintFn>("nvmlDeviceGetEnforcedPowerLimit")(d, &v), NVML_SUCCESS);
  EXPECT_EQ(v, 300000u);
  unsigned long long n = 0;
  auto* ecc = nvml.fn<EccCountFn>("nvmlDeviceGetTotalEccErrors");
  ASSERT_EQ(ecc(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, &n), NVML_SUCCESS);
  EXPECT_EQ(n, 12u);
  ASSERT_EQ(ecc(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &n), NVML_SUCCESS);
  EXPECT_EQ(n, 3u);
  unsigned util = 0, period = 0;
  ASSERT_EQ(nvml.fn<VideoUtilFn>("nvmlDeviceGetEncoderUtilization")(d, &util, &period), NVML_SUCCESS);
  EXPECT_EQ(util, 40u);
  EXPECT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "util_dec=150"}).exit_status, 1) << "percent";
  nvmlEnableState_t display = 0;
  ASSERT_EQ(nvml.fn<EnableStateFn>("nvmlDeviceGetDisplayActive")(d, &display), NVML_SUCCESS);
  EXPECT_EQ(display, NVML_FEATURE_ENABLED);

  // ECC off: no mode to count under.
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "ecc=0", "fan_speed=none", "pstate=auto"}).exit_status, 0);
  nvmlEnableState_t cur = 1, pending = 1;
  ASSERT_EQ(nvml.fn<EnablePairFn>("nvmlDeviceGetEccMode")(d, &cur, &pending), NVML_SUCCESS);
  EXPECT_EQ(cur, NVML_FEATURE_DISABLED);
  EXPECT_EQ(ecc(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &n), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(nvml.fn<UintFn>("nvmlDeviceGetFanSpeed")(d, &v), NVML_ERROR_NOT_SUPPORTED);
  ASSERT_EQ(nvml.fn<PstateFn>("nvmlDeviceGetPerformanceState")(d, &p), NVML_SUCCESS);
  EXPECT_EQ(p, NVML_PSTATE_8);
}

TEST_F(Board, BadSetValuesAreRefused) {
  for (const char* kv : {"fan_speed=201", "fan_speed=-1", "pstate=16", "pstate=none", "ecc=2", "util_enc=101",
                         "ecc_corrected=x", "display_active=maybe"}) {
    EXPECT_EQ(ctl(dir.path(), {"set", "--gpu", "0", kv}).exit_status, 1) << kv;
  }
}

// P0 while a context lives on the GPU, P8 once it is gone; device utilization alone also counts.
TEST_F(Board, PerformanceStateFollowsWork) {
  auto* pstate = nvml.fn<PstateFn>("nvmlDeviceGetPerformanceState");
  nvmlPstates_t p = -1;
  {
    std::string error;
    auto proc = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &error);
    ASSERT_TRUE(proc) << error;
    ASSERT_EQ(pstate(nvml.device(0), &p), NVML_SUCCESS);
    EXPECT_EQ(p, NVML_PSTATE_0);
    ASSERT_EQ(pstate(nvml.device(1), &p), NVML_SUCCESS);
    EXPECT_EQ(p, NVML_PSTATE_8) << "the other GPU is idle";
    proc->signal_owner(SIGKILL);
  }
  EXPECT_TRUE(eventually([&] { return pstate(nvml.device(0), &p) == NVML_SUCCESS && p == NVML_PSTATE_8; }));
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "util_gpu=5"}).exit_status, 0);
  ASSERT_EQ(pstate(nvml.device(1), &p), NVML_SUCCESS);
  EXPECT_EQ(p, NVML_PSTATE_0);
}

TEST_F(Board, BadArguments) {
  nvmlDevice_t d = nvml.device(0);
  int not_a_device = 0;
  auto bogus = reinterpret_cast<nvmlDevice_t>(&not_a_device);
  unsigned v = 0, w = 0;
  for (const char* sym : {"nvmlDeviceGetFanSpeed", "nvmlDeviceGetPowerManagementLimit",
                          "nvmlDeviceGetEnforcedPowerLimit"}) {
    EXPECT_EQ(nvml.fn<UintFn>(sym)(d, nullptr), NVML_ERROR_INVALID_ARGUMENT) << sym;
    EXPECT_EQ(nvml.fn<UintFn>(sym)(bogus, &v), NVML_ERROR_INVALID_ARGUMENT) << sym;
  }
  EXPECT_EQ(nvml.fn<PstateFn>("nvmlDeviceGetPerformanceState")(d, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  nvmlEnableState_t e = 0;
  EXPECT_EQ(nvml.fn<EnablePairFn>("nvmlDeviceGetEccMode")(d, &e, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml.fn<EnablePairFn>("nvmlDeviceGetEccMode")(d, nullptr, &e), NVML_ERROR_INVALID_ARGUMENT);
  auto* ecc = nvml.fn<EccCountFn>("nvmlDeviceGetTotalEccErrors");
  unsigned long long n = 0;
  EXPECT_EQ(ecc(d, NVML_MEMORY_ERROR_TYPE_COUNT, NVML_VOLATILE_ECC, &n), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ecc(d, -1, NVML_VOLATILE_ECC, &n), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ecc(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_ECC_COUNTER_TYPE_COUNT, &n), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(ecc(d, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  for (const char* sym : {"nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization"}) {
    EXPECT_EQ(nvml.fn<VideoUtilFn>(sym)(d, nullptr, &w), NVML_ERROR_INVALID_ARGUMENT) << sym;
    EXPECT_EQ(nvml.fn<VideoUtilFn>(sym)(d, &v, nullptr), NVML_ERROR_INVALID_ARGUMENT) << sym;
  }
  EXPECT_EQ(nvml.fn<EnableStateFn>("nvmlDeviceGetDisplayActive")(d, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  nvmlDriverModel_t m = 0;
  auto* model = nvml.fn<DriverModelFn>("nvmlDeviceGetDriverModel");
  EXPECT_EQ(model(d, nullptr, nullptr), NVML_ERROR_INVALID_ARGUMENT) << "both NULL";
  EXPECT_EQ(model(d, &m, nullptr), NVML_ERROR_NOT_SUPPORTED) << "one is enough";
  EXPECT_EQ(model(bogus, &m, &m), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(Board, LostGpuAndFaults) {
  ASSERT_EQ(ctl(dir.path(), {"set", "--gpu", "1", "lost=1", "fan_speed=30"}).exit_status, 0);
  nvmlDevice_t lost = nvml.device(1);
  unsigned v = 0, w = 0;
  for (const char* sym : {"nvmlDeviceGetFanSpeed", "nvmlDeviceGetPowerManagementLimit",
                          "nvmlDeviceGetEnforcedPowerLimit"}) {
    EXPECT_EQ(nvml.fn<UintFn>(sym)(lost, &v), NVML_ERROR_GPU_IS_LOST) << sym;
  }
  nvmlPstates_t p = 0;
  EXPECT_EQ(nvml.fn<PstateFn>("nvmlDeviceGetPerformanceState")(lost, &p), NVML_ERROR_GPU_IS_LOST);
  nvmlEnableState_t a = 0, b = 0;
  EXPECT_EQ(nvml.fn<EnablePairFn>("nvmlDeviceGetEccMode")(lost, &a, &b), NVML_ERROR_GPU_IS_LOST);
  unsigned long long n = 0;
  EXPECT_EQ(nvml.fn<EccCountFn>("nvmlDeviceGetTotalEccErrors")(lost, 0, 0, &n), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml.fn<VideoUtilFn>("nvmlDeviceGetEncoderUtilization")(lost, &v, &w), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml.fn<VideoUtilFn>("nvmlDeviceGetDecoderUtilization")(lost, &v, &w), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml.fn<EnableStateFn>("nvmlDeviceGetDisplayActive")(lost, &a), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml.fn<DriverModelFn>("nvmlDeviceGetDriverModel")(lost, &a, &b), NVML_ERROR_GPU_IS_LOST);
  EXPECT_EQ(nvml.fn<UintFn>("nvmlDeviceGetPowerManagementLimit")(nvml.device(0), &v), NVML_SUCCESS) << "GPU 0 is fine";

  ASSERT_EQ(ctl(dir.path(), {"fault", "--call", "nvmlDeviceGetPerformanceState", "--code", "999", "--gpu", "0"})
                .exit_status,
            0);
  EXPECT_EQ(nvml.fn<PstateFn>("nvmlDeviceGetPerformanceState")(nvml.device(0), &p), NVML_ERROR_UNKNOWN);
}

TEST(BoardMig, NotSupportedThroughMig) {
  TempDir dir;
  ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "1", "--mig", "0:2"}).exit_status, 0);
  Nvml nvml("r550");
  ASSERT_EQ(nvml.init(dir.path()), NVML_SUCCESS);
  nvmlDevice_t gpu = nvml.device(0), mig = nullptr;
  ASSERT_EQ(nvml.fn<MigHandleFn>("nvmlDeviceGetMigDeviceHandleByIndex")(gpu, 0, &mig), NVML_SUCCESS);
  unsigned v = 0, w = 0;
  // "On MIG-enabled GPUs, querying encoder/decoder utilization is not currently supported."
  for (nvmlDevice_t h : {gpu, mig}) {
    EXPECT_EQ(nvml.fn<VideoUtilFn>("nvmlDeviceGetEncoderUtilization")(h, &v, &w), NVML_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(nvml.fn<VideoUtilFn>("nvmlDeviceGetDecoderUtilization")(h, &v, &w), NVML_ERROR_NOT_SUPPORTED);
  }
  EXPECT_EQ(nvml.fn<UintFn>("nvmlDeviceGetPowerManagementLimit")(gpu, &v), NVML_SUCCESS) << "the board answers";
  EXPECT_EQ(nvml.fn<UintFn>("nvmlDeviceGetPowerManagementLimit")(mig, &v), NVML_ERROR_NOT_SUPPORTED);
  nvmlPstates_t p = 0;
  EXPECT_EQ(nvml.fn<PstateFn>("nvmlDeviceGetPerformanceState")(mig, &p), NVML_ERROR_NOT_SUPPORTED);
}

TEST(BoardGenerations, EveryGenerationExportsThem) {
  for (const auto& gen : all_generations()) {
    Nvml nvml(gen);
    for (const char* sym : {"nvmlDeviceGetFanSpeed", "nvmlDeviceGetPerformanceState",
                            "nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetEnforcedPowerLimit",
                            "nvmlDeviceGetEccMode", "nvmlDeviceGetTotalEccErrors",
                            "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization",
                            "nvmlDeviceGetDisplayActive", "nvmlDeviceGetDriverModel"}) {
      EXPECT_TRUE(nvml.has(sym)) << gen << " " << sym;
    }
    // nvmlDeviceGetDriverModel_v2 first appears in the 555.42.02 header.
    EXPECT_FALSE(nvml.has("nvmlDeviceGetDriverModel_v2")) << gen;
  }
}

}  // namespace
}  // namespace gpusim::test
