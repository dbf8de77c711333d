// A host with AMD GPUs only (the simulated DRM driver, no NVIDIA GPU node and no NVIDIA library):
// that is normal, not a fault. doctor says so in one info line and exits 0 on a clean host; ps
// exits 0. GPUs are named by PCI address: `reap --gpus` ends the user's ROCm job on the GPU named
// and leaves the same user's job on the other GPU running; `kill --gpu` takes the short form
// (c2:00.0); an NVIDIA index is refused as a usage error naming the GPUs the host has.
#include <signal.h>

#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "doctor_support.hpp"
#include "drm_host_support.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(AmdOnlyHost, NoNvidiaLibraryIsNormalAndGpusAreNamedByPciAddress) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user's processes";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host({"--gpus", "0"});
  const std::map<std::string, std::string> no_nvidia{{"GPUREAP_NVML_LIBRARY", host.state_dir() + "/no/libnvidia-ml.so.1"}};
  const std::string first = "0000:c1:00.0", second = "0000:c2:00.0";
  host.add_drm_gpu({.pci = first, .card = 1, .render = 128, .kfd = true});
  host.add_drm_gpu({.pci = second, .card = 2, .render = 129, .kfd = true});

  int rc = -1;
  const auto clean = doctor_json(host, {"--settle", "0"}, &rc, no_nvidia);
  EXPECT_EQ(rc, 0) << clean.dump(2);
  const auto no_driver = findings(clean, "no-driver");
  ASSERT_EQ(no_driver.size(), 1u) << clean["findings"].dump(2);
  EXPECT_EQ(no_driver.front()["severity"], "info");
  for (const auto& f : clean["findings"]) EXPECT_NE(f["severity"], "critical") << f.dump(2);
  const auto ps = host.gpureap({"ps", "--json"}, no_nvidia);
  EXPECT_EQ(ps.exit_code, 0) << ps.err;

  auto job = host.start_drm_client({"--node", "renderD128", "--vram", "2GiB", "--kfd", "--workers", "1"}, pw->pw_uid);
  auto other = host.start_drm_client({"--node", "renderD129", "--vram", "1GiB", "--kfd"}, pw->pw_uid);
  ASSERT_GT(job.pid, 0) << job.ready_line;
  ASSERT_GT(other.pid, 0) << other.ready_line;

  const auto refused = host.gpureap({"kill", "--gpu", "0", "--dry-run"}, no_nvidia);
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_NE(refused.err.find(first), std::string::npos) << refused.err;
  const auto dry = kill_json(host, {"--gpu", "c2:00.0", "--dry-run"}, &rc, nullptr, no_nvidia);
  EXPECT_EQ(rc, 0) << dry.dump(2);
  EXPECT_NE(kill_target(dry, other.pid), nullptr) << dry.dump(2);
  EXPECT_EQ(kill_target(dry, job.pid), nullptr) << "not on the GPU named: " << dry.dump(2);

  const auto reaped = host.gpureap_json({"reap", "--user", kTestUserName, "--gpus", first, "--json"}, &rc, no_nvidia);
  EXPECT_EQ(rc, 0) << reaped.dump(2);
  for (pid_t pid : {job.pid, job.workers.at(0)}) EXPECT_TRUE(eventually([&] { return !running(pid); })) << pid;
  EXPECT_TRUE(running(other.pid)) << "the user's job on " << second << " was ended";
  ASSERT_EQ(reaped["drm_gpus"].size(), 1u) << reaped.dump(2);
  EXPECT_EQ(reaped["drm_gpus"][0]["pci_bus_id"], first);
  EXPECT_TRUE(reaped["drm_gpus"][0]["verified"].get<bool>()) << reaped.dump(2);
}

}  // namespace
}  // namespace gpureap::test
