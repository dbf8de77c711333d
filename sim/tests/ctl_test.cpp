// The control program: validation, status output, free and reset.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include "common/config.hpp"
#include "common/file_io.hpp"
#include "harness.hpp"

namespace gpusim::test {
namespace {

using nlohmann::json;

TEST(Ctl, InitWritesConfigAndDevices) {
  TempDir dir;
  auto r = ctl(dir.path(), {"init", "--gpus", "3", "--memory", "40GiB", "--reserved", "256MiB", "--name", "NVIDIA A100-SXM4-40GB",
                            "--mig", "2:7"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  auto cfg = load_config(dir.path() + "/config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  ASSERT_EQ(cfg->gpus.size(), 3u);
  EXPECT_EQ(cfg->gpus[0].memory_total, 40 * GiB);
  EXPECT_EQ(cfg->gpus[0].memory_reserved, 256 * MiB);
  EXPECT_EQ(cfg->gpus[1].pci_bus_id(), "00000000:2A:00.0");
  EXPECT_NE(cfg->gpus[0].uuid, cfg->gpus[1].uuid);
  EXPECT_TRUE(cfg->gpus[2].mig_enabled);
  EXPECT_EQ(cfg->gpus[2].mig.size(), 7u);
  EXPECT_EQ(cfg->gpus[2].mig[0].name, "MIG 1g.5gb");
  for (const char* f : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia0", "nvidia1", "nvidia2"}) {
    EXPECT_EQ(::access((dir.path() + "/dev/" + f).c_str(), F_OK), 0) << f;
  }
  auto caps = list_dir(dir.path() + "/dev/nvidia-caps");
  ASSERT_TRUE(caps.ok());
  EXPECT_EQ(caps->size(), 14u);
}

TEST(Ctl, ReinitWipesAllocations) {
  TempDir dir;
  ASSERT_EQ(ctl(dir.path(), {"init"}).exit_status, 0);
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--leak"}, &err);
  ASSERT_TRUE(p) << err;
  ASSERT_EQ(ctl(dir.path(), {"init"}).exit_status, 0);
  auto r = ctl(dir.path(), {"status", "--json"});
  ASSERT_EQ(r.exit_status, 0);
  EXPECT_TRUE(json::parse(r.out)["allocations"].empty());
}

TEST(Ctl, RejectsBadInput) {
  TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  auto r = ctl(dir.path(), {"status"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.err.find("gpusim --state"), std::string::npos) << r.err;
  for (const Case& c : std::vector<Case>{{{"init", "--memory", "lots"}, "invalid size"},
                                         {{"init", "--reserved", "90GiB"}, "leaves no memory"},
                                         {{"init", "--gpus", "2", "--minors", "0"}, "1 minor(s) for 2 GPU(s)"},
                                         {{"init", "--mig", "3:2"}, "no GPU 3"},
                                         {{"init", "--mig", "0:8"}, "1 to 7"}}) {
    auto res = ctl(dir.path(), c.args);
    EXPECT_EQ(res.exit_status, 1) << c.args[1];
    EXPECT_NE(res.err.find(c.message), std::string::npos) << res.err;
  }
  ASSERT_EQ(ctl(dir.path(), {"init"}).exit_status, 0);
  for (const Case& c : std::vector<Case>{{{"set", "--gpu", "0", "colour=blue"}, "unknown key 'colour'"},
                                         {{"set", "--gpu", "0", "lost=maybe"}, "expected 0 or 1"},
                                         {{"set", "--gpu", "4", "lost=1"}, "no GPU 4"},
                                         {{"set", "--gpu", "0", "util_gpu=140"}, "0..100"},
                                         {{"set", "--gpu", "0", "base_used=100GiB"}, "larger than"},
                                         {{"fault", "--call", "nvmlDeviceGetFrobnication", "--code", "3"}, "no simulated driver exports"},
                                         {{"fault", "--call", "nvmlDeviceGetMemoryInfo"}, "--code"},
                                         {{"free"}, "exactly one of"}}) {
    auto res = ctl(dir.path(), c.args);
    EXPECT_EQ(res.exit_status, 1) << c.args[0] << " " << c.args.back();
    EXPECT_NE(res.err.find(c.message), std::string::npos) << res.err;
  }
  EXPECT_EQ(ctl(dir.path(), {"bogus"}).exit_status, 2);
  EXPECT_EQ(ctl(dir.path(), {"set"}).exit_status, 2);
}

TEST(Ctl, StatusJsonShowsWhatNvmlCannot) {
  TempDir dir;
  ASSERT_EQ(ctl(dir.path(), {"init"}).exit_status, 0);
  ASSERT_EQ(ctl(dir.path(), {"fault", "--call", "nvmlDeviceGetComputeRunningProcesses*", "--code", "999", "--gpu", "0"}).exit_status, 0);
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB", "--workers", "1", "--name", "trainer"}, &err);
  ASSERT_TRUE(p) << err;
  auto r = ctl(dir.path(), {"status", "--json"});
  ASSERT_EQ(r.exit_status, 0) << r.err;
  json s = json::parse(r.out);
  ASSERT_EQ(s["allocations"].size(), 1u);
  EXPECT_EQ(s["allocations"][0]["state"], "active");
  EXPECT_EQ(s["allocations"][0]["owner_pid"], p->pid());
  EXPECT_EQ(s["allocations"][0]["owner_name"], "trainer");
  EXPECT_EQ(s["gpus"][0]["memory"]["used"], 1 * GiB);
  EXPECT_EQ(s["faults"][0]["code"], 999);

  p->signal_owner(SIGKILL);
  s = json::parse(ctl(dir.path(), {"status", "--json"}).out);
  EXPECT_EQ(s["allocations"][0]["state"], "orphaned");
  EXPECT_EQ(s["allocations"][0]["owner_alive"], false);
  EXPECT_EQ(s["allocations"][0]["held"], true);
  auto text = ctl(dir.path(), {"status"});
  EXPECT_EQ(text.exit_status, 0);
  EXPECT_NE(text.out.find("orphaned"), std::string::npos) << text.out;
}

TEST(Ctl, ResetRefusesWhileHeld) {
  TempDir dir;
  ASSERT_EQ(ctl(dir.path(), {"init", "--gpus", "2"}).exit_status, 0);
  std::string err;
  auto p = SimProcess::start(dir.path(), {"--alloc", "0:1GiB"}, &err);
  ASSERT_TRUE(p) << err;
  auto r = ctl(dir.path(), {"reset", "--gpu", "0"});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.err.find(std::to_string(p->pid())), std::string::npos) << r.err;
  EXPECT_EQ(ctl(dir.path(), {"reset", "--gpu", "1"}).exit_status, 0);
  EXPECT_EQ(ctl(dir.path(), {"reset", "--gpu", "0", "--force"}).exit_status, 0);
  json s = json::parse(ctl(dir.path(), {"status", "--json"}).out);
  EXPECT_TRUE(s["allocations"].empty());
}

TEST(FaultMatching, VersionedVariantsAndPrefixes) {
  EXPECT_TRUE(fault_matches("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo"));
  EXPECT_TRUE(fault_matches("nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2"));
  EXPECT_FALSE(fault_matches("nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetMemoryInfo"));
  EXPECT_FALSE(fault_matches("nvmlDeviceGetCount", "nvmlDeviceGetCountX"));
  EXPECT_TRUE(fault_matches("nvmlInit", "nvmlInitWithFlags"));
  EXPECT_TRUE(fault_matches("nvmlDeviceGet*", "nvmlDeviceGetName"));
  EXPECT_FALSE(fault_matches("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcessesX"));
}

}  // namespace
}  // namespace gpusim::test
