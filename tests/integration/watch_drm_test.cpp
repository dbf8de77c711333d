// `gpureap watch` on an AMD GPU of the simulated DRM driver (sim/drm): its rules see ROCm
// compute processes (holding /dev/kfd or a KFD context) with the device memory of the DRM
// clients they hold. A memory rule for one user ends that user's ROCm job and the worker it
// forked through the kill engine, and the AMD GPU's release is verified; the same user's
// graphics client on the same render node (no /dev/kfd: never a candidate) and another user's
// ROCm job run on. A rule naming an NVIDIA GPU by index never matches a ROCm process; one
// naming the AMD GPU by PCI address does, and a PCI address the host lacks is refused.
#include <pwd.h>

#include <string>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "watch_support.hpp"

namespace gpureap::test {
namespace {

const std::string kAmd = "0000:03:00.0";

TEST(WatchDrm, AMemoryRuleEndsTheUsersRocmJobAndSparesItsGraphicsClientAndOtherUsersJobs) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user's processes";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host({"--gpus", "1"});
  DrmGpuSpec amd;
  amd.pci = kAmd;
  amd.kfd = true;
  host.add_drm_gpu(amd);
  auto job = host.start_drm_client({"--node", "renderD128", "--vram", "2GiB", "--kfd", "--workers", "1"}, pw->pw_uid);
  auto graphics = host.start_drm_client({"--node", "renderD128", "--vram", "1536MiB"}, pw->pw_uid);
  auto roots_job = host.start_drm_client({"--node", "renderD128", "--vram", "3GiB", "--kfd"});
  ASSERT_EQ(job.workers.size(), 1u);
  host.drm_settle();

  const std::string policy = write_file(
      host, "policy.toml",
      std::string("mode = \"enforce\"\n") + kFast + "audit_log = \"" + host.state_dir() + "/audit.log\"\n" +
          "[terminate]\nkill_timeout = \"2s\"\nverify_timeout = \"5s\"\n"
          "[[rule]]\nname = \"big-rocm\"\ncondition = \"memory\"\nmemory_above = \"1GiB\"\nusers = [\"" + kTestUserName +
          "\"]\naction = \"terminate\"\ngrace = \"0s\"\n"
          "[[rule]]\nname = \"nvidia0\"\ncondition = \"over-age\"\nolder_than = \"10ms\"\ngpus = [0]\n"
          "[[rule]]\nname = \"everyone\"\ncondition = \"over-age\"\nolder_than = \"10ms\"\n"
          "[[rule]]\nname = \"on-amd\"\ncondition = \"over-age\"\nolder_than = \"10ms\"\ngpus = [\"" + kAmd + "\"]\n");
  BackgroundWatch watch(host, policy);

  const auto seen = watch.wait_for("notice", {{"rule", "everyone"}, {"pid", std::to_string(roots_job.pid)}});
  ASSERT_TRUE(seen);
  EXPECT_EQ(seen->field("kind"), "rocm-process") << seen->raw;
  EXPECT_EQ(seen->field("gpus"), kAmd) << seen->raw;
  EXPECT_EQ(seen->field("memory"), "3.0 GiB") << seen->raw;

  EXPECT_TRUE(watch.wait_for("notice", {{"rule", "on-amd"}, {"pid", std::to_string(roots_job.pid)}}));
  const auto matched = watch.wait_for("notice", {{"rule", "big-rocm"}, {"pid", std::to_string(job.pid)}});
  ASSERT_TRUE(matched);
  EXPECT_EQ(matched->field("kind"), "rocm-process") << matched->raw;
  EXPECT_EQ(matched->field("memory"), "2.0 GiB") << matched->raw << " (its client once, though its worker shares it)";
  const auto ended = watch.wait_for("terminate", {{"rule", "big-rocm"}, {"pid", std::to_string(job.pid)}});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->field("outcome"), "exited") << ended->raw;
  EXPECT_EQ(ended->field("verified"), "yes") << ended->raw;
  EXPECT_EQ(ended->field("also_ended"), std::to_string(job.workers[0])) << ended->raw;
  EXPECT_NE(ended->field("message").find("amd GPU " + kAmd + ": "), std::string::npos) << ended->raw;
  EXPECT_NE(ended->field("message").find("release verified"), std::string::npos) << ended->raw;
  for (pid_t pid : {job.pid, job.workers[0]}) EXPECT_TRUE(eventually([&] { return !running(pid); })) << pid;

  EXPECT_EQ(watch.stop(), 0);
  for (pid_t pid : {graphics.pid, roots_job.pid}) EXPECT_TRUE(running(pid)) << pid << " was ended";
  // A render client alone is no ROCm job, a worker is its job's, and GPU 0 is NVIDIA's.
  for (pid_t pid : {graphics.pid, job.workers[0]}) {
    EXPECT_EQ(watch.count("notice", {{"pid", std::to_string(pid)}}), 0u) << pid;
  }
  EXPECT_EQ(watch.count("notice", {{"rule", "nvidia0"}}), 0u);
  EXPECT_EQ(watch.count("notice", {{"rule", "big-rocm"}}), 1u) << "root's job is not the user's";
  const auto audit = audit_lines(host.state_dir() + "/audit.log");
  EXPECT_TRUE(audited(audit, job.pid, "SIGTERM"));
  for (pid_t pid : {graphics.pid, roots_job.pid}) EXPECT_FALSE(audited_any(audit, pid)) << pid;
}

TEST(WatchDrm, APciAddressTheHostLacksIsRefusedAndOneItHasIsTaken) {
  SimHost host({"--gpus", "1"});
  DrmGpuSpec amd;
  amd.pci = kAmd;
  host.add_drm_gpu(amd);
  const auto rule = [](const std::string& pci) {
    return std::string(kFast) + "[[rule]]\nname = \"g\"\ncondition = \"over-age\"\nolder_than = \"1h\"\ngpus = [\"" + pci + "\"]\n";
  };
  const std::string absent = write_file(host, "absent.toml", rule("0000:05:00.0"));
  const auto refused = host.gpureap({"watch", "--check-config", absent});
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_EQ(refused.err, "gpureap watch: " + absent + ":7:9: rule \"g\": gpus: no AMD or Intel GPU at 0000:05:00.0 on this host (it has: " +
                             kAmd + ")\n");
  const auto daemon = host.gpureap({"watch", "--policy", absent});
  EXPECT_EQ(daemon.exit_code, 2) << daemon.err;
  EXPECT_EQ(daemon.err, refused.err) << "the same refusal as --check-config's";
  const std::string present = write_file(host, "present.toml", rule("0000:03:00.0"));
  const auto check = host.gpureap({"watch", "--check-config", present});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.out.find("GPUs " + kAmd), std::string::npos) << check.out;
}

}  // namespace
}  // namespace gpureap::test
