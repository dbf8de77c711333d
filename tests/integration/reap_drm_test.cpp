// `gpureap reap --user` on a host with an NVIDIA GPU and an AMD GPU of the simulated DRM driver
// (sim/drm), where the job's user runs a ROCm job (/dev/kfd and a render client, with a forked
// worker), a display client on /dev/dri/card0 (a compositor's scanout buffers) and a graphics
// client on the render node (a browser), and root runs a ROCm job of its own. reap ends the
// user's NVIDIA and ROCm jobs and verifies the AMD GPU's release; the display and graphics
// clients are spared and say why (a render or card node proves no job), root's job runs on.
#include <signal.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "doctor_support.hpp"
#include "drm_host_support.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

const nlohmann::json* spared_entry(const nlohmann::json& report, pid_t pid) {
  for (const auto& s : report["spared"]) {
    if (s["pid"] == pid) return &s;
  }
  return nullptr;
}

TEST(ReapDrm, TheUsersRocmJobEndsAndItsDisplayAndGraphicsClientsAreLeftAlone) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user's processes";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host({"--gpus", "1"});
  DrmGpuSpec amd;
  amd.pci = "0000:03:00.0";
  amd.card = 0;  // /dev/dri/card0: the node a desktop session's compositor holds
  amd.kfd = true;
  host.add_drm_gpu(amd);
  auto cuda_job = host.start({"--alloc", "0:2GiB", "--workers", "1"}, pw->pw_uid);
  auto rocm_job = host.start_drm_client({"--node", "renderD128", "--vram", "2GiB", "--kfd", "--workers", "1"}, pw->pw_uid);
  auto display = host.start_drm_client({"--node", "card0", "--vram", "64MiB"}, pw->pw_uid);
  auto graphics = host.start_drm_client({"--node", "renderD128", "--vram", "256MiB"}, pw->pw_uid);
  auto roots_job = host.start_drm_client({"--node", "renderD128", "--vram", "1GiB", "--kfd"});
  ASSERT_EQ(rocm_job.workers.size(), 1u);
  host.drm_settle();

  int rc = -1;
  const auto report = host.gpureap_json({"reap", "--user", kTestUserName, "--json"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  for (pid_t pid : {cuda_job.pid, cuda_job.workers.at(0), rocm_job.pid, rocm_job.workers.at(0)}) {
    EXPECT_TRUE(eventually([&] { return !running(pid); })) << "PID " << pid << " survived";
  }
  EXPECT_NE(kill_target(report, rocm_job.pid), nullptr) << report.dump(2);
  for (pid_t pid : {display.pid, graphics.pid}) {
    EXPECT_TRUE(running(pid)) << "the user's DRM client " << pid << " was ended";
    EXPECT_EQ(kill_target(report, pid), nullptr) << pid << report.dump(2);
    const auto* spared = spared_entry(report, pid);
    ASSERT_NE(spared, nullptr) << pid << report["spared"].dump(2);
    EXPECT_NE((*spared)["reason"].get<std::string>().find("display or render nodes"), std::string::npos) << spared->dump();
  }
  EXPECT_TRUE(running(roots_job.pid));
  EXPECT_EQ(kill_target(report, roots_job.pid), nullptr);
  ASSERT_EQ(report["drm_gpus"].size(), 1u) << report.dump(2);
  const auto& gpu = report["drm_gpus"][0];
  EXPECT_TRUE(gpu["verified"].get<bool>()) << gpu.dump(2);
  EXPECT_GE(gpu["freed_bytes"].get<std::uint64_t>(), 2 * GiB) << gpu.dump(2);
  // The job's KFD context; its worker inherited /dev/kfd (and so was taken) but has no context
  // of its own: the kernel keeps one per process that opened it, by its mm.
  EXPECT_EQ(gpu["kfd_pids"], nlohmann::json::array({rocm_job.pid})) << gpu.dump(2);
  EXPECT_FALSE(std::filesystem::exists(host.state_dir() + "/sys/class/kfd/kfd/proc/" + std::to_string(rocm_job.pid)));
  EXPECT_TRUE(std::filesystem::exists(host.state_dir() + "/sys/class/kfd/kfd/proc/" + std::to_string(roots_job.pid)));
}

// A user's ROCm job (its own KFD context and a render client) forks a worker and is SIGKILLed:
// the worker keeps both descriptors, so the kernel keeps the job's KFD context and its VRAM.
// The worker is the job's leftover: doctor names it with `gpureap kill <worker>` first and
// offers no reset; `kill --user` selects it; `reap --user` ends it and verifies the release (the
// context's directory goes). The user's graphics client (a render node alone) is spared, and
// root's job, killed the same way, is a bystander: its worker is root's leftover, not the user's.
TEST(ReapDrm, ADeadRocmJobsWorkerIsTheJobsLeftoverAndEndsWithTheContextVerified) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user's processes";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host({"--gpus", "1"});
  DrmGpuSpec amd;
  amd.pci = "0000:03:00.0";
  amd.kfd = true;
  host.add_drm_gpu(amd);
  auto rocm_job = host.start_drm_client({"--node", "renderD128", "--vram", "3GiB", "--kfd", "--workers", "1"}, pw->pw_uid);
  auto graphics = host.start_drm_client({"--node", "renderD128", "--vram", "256MiB"}, pw->pw_uid);
  auto roots_job = host.start_drm_client({"--node", "renderD128", "--vram", "1GiB", "--kfd", "--workers", "1"});
  ASSERT_EQ(rocm_job.workers.size(), 1u) << rocm_job.ready_line;
  const pid_t root_pid = rocm_job.pid, worker = rocm_job.workers.at(0);
  const std::string context_dir = host.state_dir() + "/sys/class/kfd/kfd/proc/" + std::to_string(root_pid);
  ASSERT_EQ(::kill(root_pid, SIGKILL), 0);
  rocm_job.wait_exit();
  // Root's job dies the same way: its worker is root's leftover, never the user's.
  const pid_t roots_root = roots_job.pid, roots_worker = roots_job.workers.at(0);
  ASSERT_EQ(::kill(roots_root, SIGKILL), 0);
  roots_job.wait_exit();
  host.drm_settle();
  ASSERT_TRUE(running(worker));
  ASSERT_TRUE(std::filesystem::exists(context_dir)) << "the worker's /dev/kfd keeps the context";

  int rc = -1;
  const auto report = doctor_json(host, {"--settle", "0"}, &rc);
  const auto found = findings(report, "kfd-process-left-behind");
  const nlohmann::json* left = nullptr;
  for (const auto& f : found) {
    if (f["evidence"]["pid"] == root_pid) left = &f;
  }
  ASSERT_NE(left, nullptr) << report["findings"].dump(2);
  EXPECT_EQ((*left)["evidence"]["held_by"], nlohmann::json::array({worker})) << left->dump(2);
  EXPECT_EQ((*left)["gpu"], amd.pci);
  EXPECT_EQ((*left)["remedies"][0]["command"], "gpureap kill " + std::to_string(worker)) << left->dump(2);
  for (const auto& remedy : (*left)["remedies"]) {
    EXPECT_EQ(remedy["command"].get<std::string>().find("amdgpu_gpu_recover"), std::string::npos)
        << "a reset is not offered while a process holds the memory: " << remedy.dump();
  }

  const nlohmann::json* roots = nullptr;
  for (const auto& f : found) {
    if (f["evidence"]["pid"] == roots_root) roots = &f;
  }
  ASSERT_NE(roots, nullptr) << report["findings"].dump(2);
  EXPECT_EQ((*roots)["evidence"]["held_by"], nlohmann::json::array({roots_worker})) << roots->dump(2);

  const auto dry = kill_json(host, {"--user", kTestUserName, "--dry-run"}, &rc);
  EXPECT_NE(kill_target(dry, worker), nullptr) << dry.dump(2);
  EXPECT_EQ(kill_target(dry, graphics.pid), nullptr) << dry.dump(2);
  EXPECT_EQ(kill_target(dry, roots_worker), nullptr) << "root's leftover is not the user's: " << dry.dump(2);

  const auto reaped = host.gpureap_json({"reap", "--user", kTestUserName, "--json"}, &rc);
  EXPECT_EQ(rc, 0) << reaped.dump(2);
  EXPECT_NE(kill_target(reaped, worker), nullptr) << reaped.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(worker); })) << "the worker survived";
  ASSERT_EQ(reaped["drm_gpus"].size(), 1u) << reaped.dump(2);
  const auto& gpu = reaped["drm_gpus"][0];
  EXPECT_TRUE(gpu["verified"].get<bool>()) << gpu.dump(2);
  EXPECT_GE(gpu["freed_bytes"].get<std::uint64_t>(), 3 * GiB) << gpu.dump(2);
  EXPECT_EQ(gpu["kfd_pids"], nlohmann::json::array({root_pid})) << gpu.dump(2);
  EXPECT_FALSE(std::filesystem::exists(context_dir));
  EXPECT_TRUE(running(graphics.pid)) << "the user's graphics client was ended";
  EXPECT_NE(spared_entry(reaped, graphics.pid), nullptr) << reaped["spared"].dump(2);
  EXPECT_TRUE(running(roots_worker)) << "root's leftover was ended by the user's reap";
  EXPECT_TRUE(std::filesystem::exists(host.state_dir() + "/sys/class/kfd/kfd/proc/" + std::to_string(roots_root)));
}

}  // namespace
}  // namespace gpureap::test
