// The loader against each simulated driver generation, and driver failures: no library,
// init failure, a lost GPU, MIG, unknown memory.
#include <signal.h>

#include <gtest/gtest.h>

#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

class DriverGeneration : public ::testing::TestWithParam<std::string> {};

TEST_P(DriverGeneration, PidsAndMemoryComeOutRight) {
  SimHost host({"--gpus", "2"}, GetParam());
  // Several processes, so a wrong stride would shift the second and third records.
  auto a = host.start({"--alloc", "0:1GiB"});
  auto b = host.start({"--alloc", "0:2GiB"});
  auto c = host.start({"--alloc", "0:3GiB", "--alloc", "1:512MiB"});
  int rc = -1;
  const auto ps = host.ps_json({}, &rc);
  EXPECT_EQ(rc, 0);
  const std::pair<const SimProcess*, unsigned long long> expected[] = {{&a, 1 * GiB}, {&b, 2 * GiB}, {&c, 3 * GiB}};
  for (const auto& [process, bytes] : expected) {
    const auto* p = find_process(ps, process->pid, 0);
    ASSERT_NE(p, nullptr) << GetParam() << ": pid " << process->pid << " missing\n" << ps.dump(2);
    EXPECT_EQ((*p)["gpu_memory_bytes"], bytes) << GetParam();
    EXPECT_EQ((*p)["identity"], "ok");
    EXPECT_TRUE((*p)["gpu_instance_id"].is_null());
  }
  const auto* c1 = find_process(ps, c.pid, 1);
  ASSERT_NE(c1, nullptr);
  EXPECT_EQ((*c1)["gpu_memory_bytes"], 512 * MiB);
  EXPECT_EQ(ps["processes"].size(), 4u) << ps.dump(2);
  // v1 memory info (drivers before 510) counts the driver's reservation as used, and there is
  // no way to tell it apart: it shows as unattributed.
  const bool v1 = GetParam() == "r450" || GetParam() == "r470";
  EXPECT_EQ(gpu_entry(ps, 0)["memory"]["unattributed_bytes"], v1 ? 512 * MiB : 0);
  const auto& warnings = gpu_entry(ps, 0)["warnings"];
  if (GetParam() == "quirk32") {
    ASSERT_FALSE(warnings.empty()) << "the stride override must be reported";
    EXPECT_NE(warnings[0].get<std::string>().find("32-byte"), std::string::npos);
  } else {
    EXPECT_TRUE(warnings.empty()) << warnings.dump();
  }
  const std::string source = gpu_entry(ps, 0)["memory"]["source"];
  EXPECT_EQ(source, v1 ? "v1" : "v2");
}

INSTANTIATE_TEST_SUITE_P(AllGenerations, DriverGeneration,
                         ::testing::Values("r450", "r470", "r535_54", "r535_98", "r550", "quirk32"));

TEST(DriverFailure, NoLibraryExplainsAndStillListsHolders) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  // No override and an empty loader path: the soname cannot be found, as on a host without a driver.
  auto env = host.env();
  const auto result = host.gpureap({"ps", "--json"}, {{"GPUREAP_NVML_LIBRARY", ""}, {"LD_LIBRARY_PATH", "/nonexistent"}});
  if (result.exit_code == 0) GTEST_SKIP() << "this host has a real libnvidia-ml.so.1 in its loader path";
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_NE(result.err.find("libnvidia-ml.so.1 not found: no NVIDIA driver on this host, or not in the loader path"),
            std::string::npos)
      << result.err;
  const auto ps = nlohmann::json::parse(result.out);
  EXPECT_FALSE(ps["driver"]["loaded"].get<bool>());
  EXPECT_EQ(ps["driver"]["error"]["kind"], "library_not_found");
  EXPECT_TRUE(ps["gpus"].empty());
  ASSERT_NE(find_holder(ps, job.pid), nullptr) << ps.dump(2);
  ASSERT_NE(find_holder(ps, job.workers.at(0)), nullptr);

  const auto text = host.gpureap({"ps"}, {{"GPUREAP_NVML_LIBRARY", ""}, {"LD_LIBRARY_PATH", "/nonexistent"}});
  EXPECT_EQ(text.exit_code, 3);
  EXPECT_NE(text.out.find("Holders of GPU device files"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(std::to_string(job.pid)), std::string::npos);
}

TEST(DriverFailure, LibraryFoundByLoaderPathLikeAnyNvmlClient) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string lib = host.library_path();
  const auto dir = lib.substr(0, lib.rfind('/'));
  const auto result = host.gpureap({"ps", "--json"}, {{"GPUREAP_NVML_LIBRARY", ""}, {"LD_LIBRARY_PATH", dir}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto ps = nlohmann::json::parse(result.out);
  EXPECT_EQ(ps["driver"]["library"], lib);
  EXPECT_NE(find_process(ps, job.pid), nullptr);
}

TEST(DriverFailure, BadOverridePathSaysWhichPath) {
  SimHost host;
  const auto result = host.gpureap({"ps"}, {{"GPUREAP_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_NE((result.out + result.err).find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << result.out << result.err;
  EXPECT_NE((result.out + result.err).find("GPUREAP_NVML_LIBRARY"), std::string::npos) << result.out << result.err;
}

TEST(DriverFailure, InitFailureIsNamedWithItsCause) {
  SimHost host;
  host.ctl({"fault", "--call", "nvmlInit", "--code", "18"});
  const auto result = host.gpureap({"ps"});
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_NE((result.out + result.err).find("LIB_RM_VERSION_MISMATCH"), std::string::npos) << result.out << result.err;
  EXPECT_NE((result.out + result.err).find("driver upgrade"), std::string::npos) << result.out << result.err;
}

TEST(DriverFailure, KernelModuleNotLoaded) {
  SimHost host;
  const auto result = host.gpureap({"ps"}, {{"GPUSIM_STATE_DIR", "/nonexistent-state"}});
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_NE((result.out + result.err).find("DRIVER_NOT_LOADED"), std::string::npos) << result.out << result.err;
}

TEST(DriverFailure, LostGpuIsShownWhileOthersAreListed) {
  SimHost host({"--gpus", "3"});
  auto a = host.start({"--alloc", "0:1GiB"});
  auto c = host.start({"--alloc", "2:2GiB"});
  host.ctl({"set", "--gpu", "1", "lost=1"});
  int rc = -1;
  const auto ps = host.ps_json({}, &rc);
  EXPECT_EQ(rc, 5);
  ASSERT_EQ(ps["gpus"].size(), 3u);
  EXPECT_EQ(gpu_entry(ps, 1)["error"]["name"], "GPU_IS_LOST");
  EXPECT_EQ(gpu_entry(ps, 1)["error"]["code"], 15);
  EXPECT_TRUE(gpu_entry(ps, 0)["error"].is_null());
  EXPECT_NE(find_process(ps, a.pid, 0), nullptr);
  EXPECT_NE(find_process(ps, c.pid, 2), nullptr);
  const auto text = host.gpureap({"ps"});
  EXPECT_NE(text.out.find("GPU_IS_LOST"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("Xid 79"), std::string::npos) << text.out;
}

TEST(DriverFailure, UnknownProcessMemoryIsNullNotHuge) {
  SimHost host;
  auto a = host.start({"--alloc", "0:1GiB"});
  host.ctl({"set", "--gpu", "0", "memory_not_available=1"});
  const auto ps = host.ps_json();
  const auto* p = find_process(ps, a.pid);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE((*p)["gpu_memory_bytes"].is_null()) << p->dump();
  EXPECT_TRUE(gpu_entry(ps, 0)["memory"]["unattributed_bytes"].is_null());
  EXPECT_EQ(gpu_entry(ps, 0)["memory"]["used_bytes"], 1 * GiB);
}

TEST(Mig, ProcessesCarryTheirInstanceIds) {
  SimHost host({"--gpus", "1", "--mig", "0:2"});
  auto a = host.start({"--alloc", "0:2GiB:C:1"});
  auto b = host.start({"--alloc", "0:1GiB:C:2"});
  const auto ps = host.ps_json();
  const auto& gpu = gpu_entry(ps, 0);
  EXPECT_TRUE(gpu["mig"]["enabled"].get<bool>());
  ASSERT_EQ(gpu["mig"]["devices"].size(), 2u) << gpu.dump(2);
  EXPECT_TRUE(gpu["mig"]["devices"][0]["uuid"].get<std::string>().rfind("MIG-", 0) == 0);
  const auto* pa = find_process(ps, a.pid);
  const auto* pb = find_process(ps, b.pid);
  ASSERT_NE(pa, nullptr) << ps.dump(2);
  ASSERT_NE(pb, nullptr);
  EXPECT_EQ((*pa)["gpu_instance_id"], 1);
  EXPECT_EQ((*pb)["gpu_instance_id"], 2);
  EXPECT_EQ((*pa)["identity"], "ok");
}

TEST(Utilization, PerProcessSmUtilizationIsReported) {
  SimHost host;
  auto a = host.start({"--alloc", "0:1GiB", "--sm-util", "73", "--mem-util", "41"});
  const auto ps = host.ps_json();
  const auto* p = find_process(ps, a.pid);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ((*p)["sm_util_percent"], 73);
  EXPECT_EQ((*p)["mem_util_percent"], 41);
}

}  // namespace
}  // namespace gpureap::test
