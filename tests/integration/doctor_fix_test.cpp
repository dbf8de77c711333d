// doctor --fix: ends orphaned holders through the kill engine and verifies the memory came
// back, leaves everything else alone, asks first, and resets a GPU only when allowed.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include <gtest/gtest.h>

#include "doctor_support.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(text.substr(close + 2));
  char state = 0;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

// PPID 1 proves nothing: a healthy service holding /dev/nvidia0, on a GPU whose memory is
// fully explained, is not called orphaned and survives doctor --fix --yes.
TEST(DoctorFix, Ppid1ServiceHoldingADeviceFileIsNotAnOrphanAndSurvivesFix) {
  SimHost host;
  auto healthy = host.start({"--alloc", "0:1GiB"});
  const Service service(host);
  ASSERT_GT(service.pid, 0);
  const pid_t ppid = parent_of(service.pid);
  RecordProperty("service_parent", ppid);  // 1, or the nearest subreaper
  const auto ps = host.ps_json();
  const auto* holder = find_holder(ps, service.pid);
  ASSERT_NE(holder, nullptr) << ps.dump(2);
  EXPECT_EQ((*holder)["role"], "unlisted") << "parent " << ppid << ": " << holder->dump();
  EXPECT_TRUE((*holder)["orphan_evidence"].is_null()) << holder->dump();
  int rc = -1;
  const auto report = doctor_json(host, {"--fix", "--yes"}, &rc);
  EXPECT_TRUE(findings(report, "orphaned-holders").empty()) << report["findings"].dump(2);
  for (const auto& f : report["fixes"]) {
    EXPECT_NE(f["finding_id"], "orphaned-holders") << f.dump();
    EXPECT_NE(f["finding_id"], "unlisted-holders") << f.dump();
  }
  EXPECT_TRUE(running(service.pid)) << "doctor --fix ended a healthy service";
  EXPECT_TRUE(running(healthy.pid));
}

TEST(DoctorFix, EndsOrphanedWorkersFreesTheMemoryAndLeavesOthersAlone) {
  SimHost host;
  const Service service(host);  // a PPID-1 service holding GPU 0's device file, beside the orphans
  auto healthy = host.start({"--alloc", "0:1GiB", "--workers", "1"});  // a live job on the same GPU
  auto other = host.start({"--alloc", "1:2GiB"});
  auto bystander = host.start({});
  auto job = orphaned_job(host, "0:4GiB");
  int rc = -1;
  const auto report = doctor_json(host, {"--fix", "--yes"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  ASSERT_EQ(report["fixes"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["fixes"][0]["finding_id"], "orphaned-holders");
  EXPECT_EQ(report["fixes"][0]["outcome"], "done") << report["fixes"][0].dump();
  EXPECT_NE(report["fixes"][0]["message"].get<std::string>().find("GPU 0: 4.0 GiB freed"), std::string::npos)
      << report["fixes"][0].dump();
  for (pid_t w : job.workers) EXPECT_FALSE(running(w)) << "worker " << w << " still runs";
  EXPECT_TRUE(running(healthy.pid));
  for (pid_t w : healthy.workers) EXPECT_TRUE(running(w)) << "a live job's worker was touched";
  EXPECT_TRUE(running(other.pid));
  EXPECT_TRUE(running(bystander.pid));
  EXPECT_TRUE(running(service.pid)) << "a service with PPID 1 is no orphan";
  const auto ps = host.ps_json();
  EXPECT_EQ(gpu_entry(ps, 0)["memory"]["used_bytes"], 1 * GiB) << "only the healthy job's memory remains";
  EXPECT_EQ(gpu_entry(ps, 1)["memory"]["used_bytes"], 2 * GiB);
  EXPECT_TRUE(findings(report, "orphaned-holders").empty()) << "the final diagnosis is clean";
}

TEST(DoctorFix, WithoutATerminalNothingChangesUnlessYes) {
  SimHost host;
  auto job = orphaned_job(host, "0:1GiB");
  const auto result = host.gpureap({"doctor", "--no-kernel-log", "--fix"});
  EXPECT_EQ(result.exit_code, 10) << result.out << result.err;
  EXPECT_NE(result.err.find("add --yes"), std::string::npos) << result.err;
  // The footer never claims a status the command does not exit with.
  EXPECT_EQ(result.out.find("exit status 1"), std::string::npos) << result.out;
  EXPECT_NE(result.err.find("exit status 10"), std::string::npos) << result.err;
  for (pid_t w : job.workers) EXPECT_TRUE(running(w));
  EXPECT_EQ(gpu_entry(host.ps_json(), 0)["memory"]["used_bytes"], 1 * GiB);
}

TEST(DoctorFix, ZombieParentGetsSigchldButIsNotEndedUnlessChosen) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--zombie-child"});
  int rc = -1;
  const auto report = doctor_json(host, {"--fix", "--yes"}, &rc);
  bool nudged = false;
  for (const auto& f : report["fixes"]) {
    if (f["finding_id"] == "zombie" && f["outcome"] == "done") nudged = true;
  }
  EXPECT_TRUE(nudged) << report.dump(2);
  EXPECT_TRUE(running(job.pid)) << "a bare --fix never ends a zombie's parent";
}

// The simulated nvidia-smi (sim/bin) resets like the real one: root, nothing using the GPU.
// gpureap runs it with a minimal environment, as it runs every program: the real one finds its
// driver in /dev, the simulated one needs this host's state directory, which a wrapper first on
// PATH gives it.
std::map<std::string, std::string> with_simulated_nvidia_smi(const SimHost& host) {
  const std::string dir = host.state_dir() + "/smi-bin";
  std::filesystem::create_directories(dir);
  const std::string wrapper = dir + "/nvidia-smi";
  std::ofstream(wrapper) << "#!/bin/sh\nGPUSIM_STATE_DIR='" << host.state_dir() << "' exec '" << GPUSIM_BIN_DIR
                         << "/nvidia-smi' \"$@\"\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms(0755));
  const char* path = std::getenv("PATH");
  return {{"PATH", dir + ":" + (path ? path : "/usr/bin:/bin")}};
}

TEST(DoctorFix, ResetsALeakedGpuOnlyWithAllowResetAndOnlyWhenNothingUsesIt) {
  if (!running_as_root()) GTEST_SKIP() << "a GPU reset needs root";
  SimHost host;
  auto leaker = host.start({"--alloc", "1:768MiB", "--leak"});
  kill(leaker.pid, SIGKILL);
  leaker.wait_exit();
  auto other = host.start({"--alloc", "0:1GiB"});
  const auto env = with_simulated_nvidia_smi(host);
  int rc = -1;

  // Without --allow-reset: the leak is reported, nothing is reset.
  auto report = doctor_json(host, {"--fix", "--yes", "--settle", "0.3"}, &rc, env);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(gpu_entry(host.ps_json(), 1)["memory"]["used_bytes"], 768 * MiB);

  // Persistence mode on blocks it: skipped, with the reason.
  report = doctor_json(host, {"--fix", "--yes", "--allow-reset", "--settle", "0.3"}, &rc, env);
  EXPECT_EQ(rc, 2);
  bool skipped = false;
  for (const auto& f : report["fixes"]) {
    if (f["finding_id"] == "memory-leak" && f["outcome"] == "skipped" &&
        f["message"].get<std::string>().find("persistence mode") != std::string::npos) {
      skipped = true;
    }
  }
  EXPECT_TRUE(skipped) << report["fixes"].dump(2);
  EXPECT_EQ(gpu_entry(host.ps_json(), 1)["memory"]["used_bytes"], 768 * MiB);

  host.ctl({"set", "--gpu", "1", "persistence=0"});
  report = doctor_json(host, {"--fix", "--yes", "--allow-reset", "--settle", "0.3"}, &rc, env);
  bool reset = false;
  for (const auto& f : report["fixes"]) {
    if (f["finding_id"] == "memory-leak" && f["outcome"] == "done") reset = true;
  }
  EXPECT_TRUE(reset) << report["fixes"].dump(2);
  EXPECT_TRUE(findings(report, "memory-leak").empty()) << report["findings"].dump(2);
  EXPECT_EQ(rc, 0) << report["findings"].dump(2);  // persistence-off on GPU 1 is information
  const auto ps = host.ps_json();
  EXPECT_EQ(gpu_entry(ps, 1)["memory"]["used_bytes"], 0);
  EXPECT_EQ(gpu_entry(ps, 0)["memory"]["used_bytes"], 1 * GiB) << "the other GPU was not touched";
  EXPECT_TRUE(running(other.pid));
}

}  // namespace
}  // namespace gpureap::test
