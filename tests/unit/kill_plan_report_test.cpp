// Pure logic of `gpureap kill` after the ladder: when a GPU counts as released, the exit
// status, the audit line, and the protected-name matching.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/common/exit_codes.hpp"
#include "audit/audit_log.hpp"
#include "cli/kill/kill_render.hpp"
#include "kill/memory_verification.hpp"
#include "kill/protected_processes.hpp"

namespace gpureap {
namespace {

constexpr std::uint64_t GiB = 1ull << 30;

PlannedGpu planned_gpu() {
  PlannedGpu gpu;
  gpu.index = 0;
  gpu.expected_free_bytes = 4 * GiB;
  gpu.baseline_used = 5 * GiB;
  gpu.others_listed_bytes = 1 * GiB;
  gpu.target_pids = {200, 201};
  return gpu;
}

GpuReading reading(std::uint64_t used, std::vector<std::pair<unsigned, std::uint64_t>> processes) {
  GpuReading r;
  r.index = 0;
  r.memory.used = used;
  for (auto [pid, bytes] : processes) {
    DriverProcess p;
    p.pid = pid;
    p.used_memory = bytes;
    r.processes.push_back(p);
  }
  return r;
}

TEST(KillVerification, ReleasedWhenTargetsAreGoneAndUsedDroppedByTheExpectedAmount) {
  const auto gpu = planned_gpu();
  EXPECT_EQ(released_bytes(gpu, reading(1 * GiB, {{300, 1 * GiB}})), 4 * GiB);
  EXPECT_EQ(released_bytes(gpu, reading(1 * GiB, {{200, 4 * GiB}})), std::nullopt) << "still listed";
  EXPECT_EQ(released_bytes(gpu, reading(5 * GiB, {{300, 1 * GiB}})), std::nullopt)
      << "owner gone but memory held (inherited descriptors)";
  EXPECT_EQ(released_bytes(gpu, reading(2 * GiB, {{300, 2 * GiB}})), 4 * GiB)
      << "another process grew by 1 GiB meanwhile: still a full release";
  EXPECT_EQ(released_bytes(gpu, reading(2 * GiB, {{300, 1 * GiB}})), std::nullopt) << "1 GiB missing";
  GpuReading lost = reading(0, {});
  lost.error = NvmlError{};
  EXPECT_EQ(released_bytes(gpu, lost), std::nullopt);
}

TEST(KillVerification, TimeoutSaysTheMemoryHasNoHolder) {
  KillPlan plan;
  plan.gpus = {planned_gpu()};
  DriverReading stuck;
  stuck.gpus = {reading(5 * GiB, {{300, 1 * GiB}})};
  VerifyOptions options;
  options.timeout = std::chrono::milliseconds(0);
  const auto results = verify_release(
      plan, [&] { return std::optional<DriverReading>(stuck); }, {}, options);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].verified);
  EXPECT_EQ(results[0].held_bytes, 4 * GiB);
  EXPECT_NE(results[0].message.find("no holder"), std::string::npos) << results[0].message;
  EXPECT_NE(results[0].message.find("gpureap doctor"), std::string::npos);

  DriverReading freed;
  freed.gpus = {reading(1 * GiB, {{300, 1 * GiB}})};
  int calls = 0;
  const auto ok = verify_release(
      plan,
      [&] {
        ++calls;
        return std::optional<DriverReading>(calls < 3 ? stuck : freed);
      },
      {}, VerifyOptions{std::chrono::milliseconds(5000), std::chrono::milliseconds(1), {}});
  ASSERT_TRUE(ok[0].verified);
  EXPECT_EQ(ok[0].freed_bytes, 4 * GiB);
  EXPECT_EQ(calls, 3);
}

TargetOutcome outcome(pid_t pid, KillOutcome kind) {
  TargetOutcome o;
  o.pid = pid;
  o.outcome = kind;
  return o;
}

TEST(KillReport, ExitStatusPrefersTheWorstFailure) {
  KillReport report;
  report.targets = {outcome(1, KillOutcome::ExitedAfterSignal), outcome(2, KillOutcome::Refused)};
  EXPECT_EQ(kill_exit_status(report), exit_code::kRefused);
  report.targets.push_back(outcome(3, KillOutcome::PermissionDenied));
  EXPECT_EQ(kill_exit_status(report), exit_code::kPermissionDenied);
  GpuVerification gpu;
  gpu.verified = false;
  report.gpus = {gpu};
  EXPECT_EQ(kill_exit_status(report), exit_code::kNotFreed);
  report.settings.verify = false;
  EXPECT_EQ(kill_exit_status(report), exit_code::kPermissionDenied) << "--no-verify claims nothing";
  report = {};
  report.targets = {outcome(1, KillOutcome::Killed), outcome(2, KillOutcome::Zombie), outcome(3, KillOutcome::IdentityChanged)};
  EXPECT_EQ(kill_exit_status(report), exit_code::kOk);
  report.targets.push_back(outcome(4, KillOutcome::Survived));
  EXPECT_EQ(kill_exit_status(report), exit_code::kNotFreed);
}

TEST(KillAudit, LineIsOneJsonObjectWithEveryField) {
  Requester who;
  who.uid = 1000;
  who.user = "alice";
  who.ppid = 77;
  who.tty = "/dev/pts/3";
  AuditRecord record{AuditStage::Sent, 1234, 56789, 15, "named on the command line", 0};
  const std::string line = audit_line(record, who, 1764430801.25);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["time"], "2025-11-29T15:40:01.250Z");
  EXPECT_EQ(j["pid"], 1234);
  EXPECT_EQ(j["start_time_ticks"], 56789);
  EXPECT_EQ(j["signal"], "SIGTERM");
  EXPECT_EQ(j["stage"], "sent");
  EXPECT_EQ(j["result"], "delivered");
  EXPECT_EQ(j["requested_by"]["user"], "alice");
  EXPECT_EQ(j["requested_by"]["tty"], "/dev/pts/3");
  record.result_errno = 1;
  record.signal = 17;
  const auto failed = nlohmann::json::parse(audit_line(record, who, 0));
  EXPECT_EQ(failed["signal"], "SIGCHLD");
  EXPECT_EQ(failed["errno"], 1);
  EXPECT_NE(failed["result"].get<std::string>().find("failed"), std::string::npos);
  record.stage = AuditStage::Sending;
  EXPECT_EQ(nlohmann::json::parse(audit_line(record, who, 0))["result"], "pending");
}

TEST(KillProtected, BuiltInNamesMatchARootOwnedExecutableNeverComm) {
  const auto list = ProtectedProcesses::builtin();
  ProcessInfo p;
  p.details_loaded = true;
  p.uid = 0;
  p.comm = "Xorg";
  p.exe = "/usr/bin/python3.11";
  EXPECT_EQ(list.match(p), std::nullopt) << "comm is anyone's to set";
  p.exe = "/usr/lib/xorg/Xorg";
  EXPECT_EQ(list.match(p), "Xorg");
  p.uid = 1000;
  EXPECT_EQ(list.match(p), std::nullopt) << "a user's own copy called Xorg";
  p.uid = 0;
  p.comm = "python3";
  p.exe = "/usr/bin/nv-hostengine (deleted)";
  EXPECT_EQ(list.match(p), "nv-hostengine");
  p.exe = "/usr/bin/dcgm-exporter";
  EXPECT_EQ(list.match(p), "dcgm*");
  p.exe = "/usr/bin/nvidia-persistenced";
  EXPECT_EQ(list.match(p), "nvidia-persistenced");
  p.details_loaded = false;
  EXPECT_EQ(list.match(p), std::nullopt) << "owner unknown: not proven";
  EXPECT_TRUE(protected_name_matches("sway", "sway"));
  EXPECT_FALSE(protected_name_matches("sway", "swayidle"));
  EXPECT_FALSE(protected_name_matches("", ""));
}

TEST(KillProtected, AddedNamesMatchCommOrExeWhoeverOwnsIt) {
  auto list = ProtectedProcesses::builtin();
  list.add("slurmstepd");
  list.add("my-long-exporter-name");
  ProcessInfo p;
  p.uid = 1000;
  p.comm = "slurmstepd";
  EXPECT_EQ(list.match(p), "slurmstepd");
  p.comm = "my-long-exporte";  // comm is cut to 15 characters
  EXPECT_EQ(list.match(p), "my-long-exporter-name");
  p.comm = "python3";
  p.exe = "/opt/bin/slurmstepd";
  EXPECT_EQ(list.match(p), "slurmstepd");
}

}  // namespace
}  // namespace gpureap
