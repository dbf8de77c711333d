// `gpureap kill` on AMD GPUs of the simulated DRM driver (sim/drm): real processes hold the
// simulated render nodes and /dev/kfd, the driver writes their fdinfo and amdgpu's sysfs figures
// from the kernel's own locks. Killing a ROCm trainer ends it and the worker it forked (which
// shares its client), and the release is verified: its client's fdinfo and its KFD directory
// gone, and mem_info_vram_used down by what the client held. A bystander with its own client on
// the same GPU and one on another GPU's render node keep running and keep their memory.
#include <signal.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "drm_host_support.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

const std::string kFirst = "0000:03:00.0";
const std::string kSecond = "0000:04:00.0";

const nlohmann::json* drm_gpu(const nlohmann::json& json, const std::string& pci) {
  for (const auto& g : json["drm_gpus"]) {
    if (g["pci_bus_id"] == pci) return &g;
  }
  return nullptr;
}

struct TwoAmdGpus {
  SimHost host{{"--gpus", "1"}};
  TwoAmdGpus(unsigned release_delay_ms = 0) {
    DrmGpuSpec first;
    first.pci = kFirst;
    first.card = 1;
    first.render = 128;
    first.kfd = true;
    first.release_delay_ms = release_delay_ms;
    host.add_drm_gpu(first);
    DrmGpuSpec second;
    second.pci = kSecond;
    second.card = 2;
    second.render = 129;
    host.add_drm_gpu(second);
  }
};

TEST(KillDrm, ARocmTrainerAndItsWorkerEndAndTheReleaseIsVerifiedBesideBystanders) {
  TwoAmdGpus amd;
  SimHost& host = amd.host;
  auto trainer = host.start_drm_client({"--node", "renderD128", "--vram", "2GiB", "--kfd", "--workers", "1"});
  auto same_gpu = host.start_drm_client({"--node", "renderD128", "--vram", "512MiB"});
  auto other_gpu = host.start_drm_client({"--node", "renderD129", "--vram", "1GiB"});
  ASSERT_EQ(trainer.workers.size(), 1u);
  host.drm_settle();
  const auto before = host.ps_json();
  const auto* first_before = drm_gpu(before, kFirst);
  ASSERT_NE(first_before, nullptr) << before.dump(2);
  const std::uint64_t used_before = (*first_before)["memory"]["used_bytes"];

  int rc = -1;
  const auto report =
      host.gpureap_json({"kill", std::to_string(trainer.pid), "--yes", "--timeout", "2", "--json"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  for (pid_t pid : {trainer.pid, trainer.workers[0]}) {
    EXPECT_TRUE(eventually([&] { return !running(pid); })) << "PID " << pid << " survived";
    EXPECT_NE(kill_target(report, pid), nullptr) << pid << report.dump(2);
  }
  for (pid_t pid : {same_gpu.pid, other_gpu.pid}) {
    EXPECT_TRUE(running(pid)) << "bystander " << pid << " was ended";
    EXPECT_EQ(kill_target(report, pid), nullptr) << pid << report.dump(2);
  }
  ASSERT_EQ(report["drm_gpus"].size(), 1u) << report.dump(2);  // the other GPU was never the trainer's
  const auto& gpu = report["drm_gpus"][0];
  EXPECT_EQ(gpu["pci_bus_id"], kFirst);
  EXPECT_EQ(gpu["vendor"], "amd");
  EXPECT_TRUE(gpu["verified"].get<bool>()) << gpu.dump(2);
  EXPECT_EQ(gpu["expected_free_bytes"], 2 * GiB);
  EXPECT_GE(gpu["freed_bytes"].get<std::uint64_t>(), 2 * GiB) << gpu.dump(2);
  ASSERT_EQ(gpu["ending_clients"].size(), 1u) << gpu.dump(2);
  EXPECT_EQ(gpu["ending_clients"][0]["pids"], nlohmann::json::array({trainer.pid, trainer.workers[0]}));
  EXPECT_EQ(gpu["kfd_pids"], nlohmann::json::array({trainer.pid}));

  // What the driver shows afterwards: the trainer's client and KFD context gone, the
  // bystanders' clients and memory where they were.
  host.drm_settle();
  const auto after = host.ps_json();
  const auto* first_after = drm_gpu(after, kFirst);
  const auto* second_after = drm_gpu(after, kSecond);
  ASSERT_NE(first_after, nullptr);
  ASSERT_NE(second_after, nullptr);
  EXPECT_EQ((*first_after)["memory"]["used_bytes"].get<std::uint64_t>(), used_before - 2 * GiB);
  ASSERT_EQ((*first_after)["clients"].size(), 1u) << first_after->dump(2);
  EXPECT_EQ((*first_after)["clients"][0]["pids"], nlohmann::json::array({same_gpu.pid}));
  EXPECT_EQ((*first_after)["clients"][0]["vram_bytes"], 512 * MiB);
  ASSERT_EQ((*second_after)["clients"].size(), 1u) << second_after->dump(2);
  EXPECT_EQ((*second_after)["clients"][0]["pids"], nlohmann::json::array({other_gpu.pid}));
  EXPECT_FALSE(std::filesystem::exists(host.state_dir() + "/sys/class/kfd/kfd/proc/" + std::to_string(trainer.pid)));

  const auto text = host.gpureap({"kill", std::to_string(same_gpu.pid), "--yes", "--timeout", "2"});
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("amd GPU " + kFirst + ": 512 MiB freed, its clients gone, verified in"), std::string::npos)
      << text.out;
  EXPECT_TRUE(running(other_gpu.pid));
}

// The driver frees a closed client's buffers after a delay (amdgpu waits for their fences):
// kill waits for the figure, not just for the processes.
TEST(KillDrm, VerificationWaitsForTheDriversFigureToDrop) {
  TwoAmdGpus amd(/*release_delay_ms=*/600);
  SimHost& host = amd.host;
  auto trainer = host.start_drm_client({"--node", "renderD128", "--vram", "1GiB"});
  host.drm_settle();
  int rc = -1;
  const auto report = host.gpureap_json({"kill", std::to_string(trainer.pid), "--yes", "--json"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  const auto* gpu = drm_gpu(report, kFirst);
  ASSERT_NE(gpu, nullptr) << report.dump(2);
  EXPECT_TRUE((*gpu)["verified"].get<bool>()) << gpu->dump(2);
  EXPECT_GE((*gpu)["verify_ms"].get<double>(), 400.0) << gpu->dump(2);
}

// A client passed to a process outside the plan stays open: kill says so and who holds it,
// instead of calling the memory freed.
TEST(KillDrm, AClientStillHeldByAProcessOutsideThePlanIsNotCalledFreed) {
  TwoAmdGpus amd;
  SimHost& host = amd.host;
  auto trainer = host.start_drm_client({"--node", "renderD128", "--vram", "1GiB", "--workers", "1"});
  ASSERT_EQ(trainer.workers.size(), 1u);
  host.drm_settle();
  int rc = -1;
  // --no-tree: the worker, which shares the trainer's client, is not a target.
  const auto report = host.gpureap_json(
      {"kill", std::to_string(trainer.pid), "--yes", "--no-tree", "--verify-timeout", "0.5", "--json"}, &rc);
  EXPECT_EQ(rc, 6) << report.dump(2);
  ASSERT_EQ(report["targets"].size(), 1u) << report.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(trainer.pid); }));
  EXPECT_TRUE(running(trainer.workers[0]));
  const auto* gpu = drm_gpu(report, kFirst);
  ASSERT_NE(gpu, nullptr) << report.dump(2);
  EXPECT_FALSE((*gpu)["verified"].get<bool>());
  ASSERT_EQ((*gpu)["kept_clients"].size(), 1u) << gpu->dump(2);
  EXPECT_EQ((*gpu)["kept_clients"][0]["outside_pids"], nlohmann::json::array({trainer.workers[0]}));
  EXPECT_EQ((*gpu)["still_held_by"], nlohmann::json::array({trainer.workers[0]}));
  EXPECT_NE((*gpu)["message"].get<std::string>().find("gpureap kill " + std::to_string(trainer.workers[0])),
            std::string::npos)
      << gpu->dump(2);
}

// `kill --user` selects the user's ROCm jobs (by /dev/kfd: AMD GPUs have no driver list) with
// their forked workers; the same user's graphics client on the same render node and root's ROCm
// job are left running. A --gpu filter names NVIDIA's GPUs and selects none of them.
TEST(KillDrm, KillUserTakesTheUsersRocmJobNotItsGraphicsClient) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user's processes";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  TwoAmdGpus amd;
  SimHost& host = amd.host;
  auto job = host.start_drm_client({"--node", "renderD128", "--vram", "2GiB", "--kfd", "--workers", "1"}, pw->pw_uid);
  auto graphics = host.start_drm_client({"--node", "renderD128", "--vram", "256MiB"}, pw->pw_uid);
  auto roots_job = host.start_drm_client({"--node", "renderD128", "--vram", "1GiB", "--kfd"});
  ASSERT_EQ(job.workers.size(), 1u);

  int rc = -1;
  const auto by_gpu = host.gpureap_json({"kill", "--user", kTestUserName, "--gpu", "0", "--dry-run", "--json"}, &rc);
  EXPECT_EQ(kill_target(by_gpu, job.pid), nullptr) << by_gpu.dump(2);

  const auto report = host.gpureap_json({"kill", "--user", kTestUserName, "--yes", "--timeout", "2", "--json"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  const auto* root = kill_target(report, job.pid);
  ASSERT_NE(root, nullptr) << report.dump(2);
  EXPECT_NE((*root)["reason"].get<std::string>().find("ROCm compute: holds /dev/kfd"), std::string::npos) << root->dump();
  ASSERT_NE(kill_target(report, job.workers[0]), nullptr) << report.dump(2);
  for (pid_t pid : {job.pid, job.workers[0]}) {
    EXPECT_TRUE(eventually([&] { return !running(pid); })) << "PID " << pid << " survived";
  }
  for (pid_t pid : {graphics.pid, roots_job.pid}) {
    EXPECT_TRUE(running(pid)) << "bystander " << pid << " was ended";
    EXPECT_EQ(kill_target(report, pid), nullptr) << pid << report.dump(2);
  }
  const auto* gpu = drm_gpu(report, kFirst);
  ASSERT_NE(gpu, nullptr) << report.dump(2);
  EXPECT_TRUE((*gpu)["verified"].get<bool>()) << gpu->dump(2);
}

// A process that holds /dev/kfd without a KFD context of its own (one handed a descriptor over a
// socket, as a service that keeps what it receives would hold it: kfd_open makes the context
// for the opener) is no ROCm job: kill's and reap's user filters leave it alone.
TEST(KillDrm, AProcessHandedADevKfdDescriptorIsNoRocmJob) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user's processes";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  TwoAmdGpus amd;
  SimHost& host = amd.host;
  const std::string dev = std::filesystem::canonical(host.dev_dir()).string();
  const NodeHolder victim(dev + "/kfd", /*with_worker=*/false, pw->pw_uid);
  ASSERT_GT(victim.fd, 0);
  host.drm_settle();
  EXPECT_FALSE(std::filesystem::exists(host.state_dir() + "/sys/class/kfd/kfd/proc/" + std::to_string(victim.pid)));
  int rc = -1;
  const auto kill = host.gpureap_json({"kill", "--user", kTestUserName, "--dry-run", "--json"}, &rc);
  EXPECT_EQ(kill_target(kill, victim.pid), nullptr) << kill.dump(2);
  const auto all = host.gpureap_json({"kill", "--all", "--dry-run", "--json"}, &rc);
  EXPECT_EQ(kill_target(all, victim.pid), nullptr) << all.dump(2);
  const auto reap = host.gpureap_json({"reap", "--user", kTestUserName, "--dry-run", "--json"}, &rc);
  EXPECT_EQ(kill_target(reap, victim.pid), nullptr) << reap.dump(2);
  EXPECT_TRUE(running(victim.pid));
}

}  // namespace
}  // namespace gpureap::test
