// `gpureap reap --user` on a host where the job's user also holds an AMD GPU's display node
// (/dev/dri/card1: a compositor, a remote desktop) and its render node: reap ends the NVIDIA job
// and leaves both alone. Nothing in reap acts on DRM holders, and this test keeps it so until
// an AMD holder can be proven to be the job's.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "drm_host_support.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(ReapDrm, TheUsersDisplayAndRenderHoldersOfAnAmdGpuAreLeftAlone) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user's processes";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host({"--gpus", "1"});
  lay_out_amd_gpu(host, "0000:03:00.0", {{"card1", 1}, {"renderD128", 128}});
  const std::string dev = std::filesystem::canonical(host.dev_dir()).string();
  auto job = host.start({"--alloc", "0:2GiB", "--workers", "1"}, pw->pw_uid);
  const NodeHolder display(dev + "/dri/card1", /*with_worker=*/false, pw->pw_uid);
  const NodeHolder renderer(dev + "/dri/renderD128", /*with_worker=*/true, pw->pw_uid);
  ASSERT_GT(display.fd, 0);
  ASSERT_GT(renderer.fd, 0);

  int rc = -1;
  const auto report = host.gpureap_json({"reap", "--user", kTestUserName, "--json"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  for (pid_t pid : {job.pid, job.workers.at(0)}) {
    EXPECT_TRUE(eventually([&] { return !running(pid); })) << "PID " << pid << " survived";
  }
  for (pid_t pid : {display.pid, renderer.pid, renderer.worker}) {
    EXPECT_TRUE(running(pid)) << "the user's DRM holder " << pid << " was ended";
    EXPECT_EQ(kill_target(report, pid), nullptr) << pid << report.dump(2);
  }
}

}  // namespace
}  // namespace gpureap::test
