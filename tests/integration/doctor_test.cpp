// gpureap doctor against real processes under the simulated driver: each finding is
// reproduced for real and asserted on its evidence and exit status.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "cgroup_support.hpp"
#include "doctor_support.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

std::vector<pid_t> holder_pids(const nlohmann::json& finding) {
  std::vector<pid_t> pids;
  for (const auto& h : finding["evidence"]["holders"]) pids.push_back(h["pid"].get<pid_t>());
  std::sort(pids.begin(), pids.end());
  return pids;
}

bool any_at_least(const nlohmann::json& report, const std::string& severity) {
  for (const auto& f : report["findings"]) {
    if (f["severity"] == "critical" || (severity == "warning" && f["severity"] == "warning")) return true;
  }
  return false;
}

TEST(Doctor, HealthyHostExitsZero) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  int rc = -1;
  const auto report = doctor_json(host, {}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_EQ(report["schema"], "gpureap.doctor/1");
  EXPECT_EQ(report["exit_code"], 0);
  EXPECT_FALSE(any_at_least(report, "warning")) << report["findings"].dump(2);
  EXPECT_EQ(report["gpus"][0]["unattributed_bytes"], 0);
  const auto text = host.gpureap({"doctor", "--no-kernel-log"});
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("exit status 0"), std::string::npos) << text.out;
}

TEST(Doctor, OwnerKilledWhileWorkersHoldDescriptorsIsExplainedByTheOrphans) {
  SimHost host;
  auto job = host.start({"--alloc", "0:4GiB", "--workers", "2"});
  ASSERT_EQ(kill(job.pid, SIGKILL), 0);
  job.wait_exit();
  ASSERT_TRUE(eventually([&] { return !running(job.pid); }));
  int rc = -1;
  const auto report = doctor_json(host, {}, &rc);
  EXPECT_EQ(rc, 1) << report.dump(2);
  const auto orphaned = findings(report, "orphaned-holders", 0);
  ASSERT_EQ(orphaned.size(), 1u) << report["findings"].dump(2);
  const auto& f = orphaned.front();
  EXPECT_EQ(f["severity"], "warning");
  EXPECT_EQ(f["evidence"]["held_bytes"], 4 * GiB);
  // The driver still lists the dead owner (as a real one does); the finding says why.
  ASSERT_EQ(f["evidence"]["listed_for_exited"].size(), 1u) << f.dump(2);
  EXPECT_EQ(f["evidence"]["listed_for_exited"][0]["pid"], job.pid);
  EXPECT_EQ(f["evidence"]["listed_for_exited"][0]["gpu_memory_bytes"], 4 * GiB);
  EXPECT_TRUE(findings(report, "unverifiable-pids").empty()) << "the exited owner is explained, not unknown";
  std::vector<pid_t> workers = job.workers;
  std::sort(workers.begin(), workers.end());
  EXPECT_EQ(holder_pids(f), workers);
  for (const auto& h : f["evidence"]["holders"]) {
    EXPECT_EQ(h["role"], "orphan");
    EXPECT_EQ(h["orphan_evidence"]["kind"], "exited-listed-group-leader") << h.dump();
    EXPECT_FALSE(h["process_group_leader_alive"].get<bool>()) << "the dead owner led their process group";
    EXPECT_GE(h["age_seconds"].get<double>(), 0.0);
  }
  std::string kill_command = "gpureap kill";
  for (pid_t w : workers) kill_command += " " + std::to_string(w);
  EXPECT_TRUE(has_remedy(f, kill_command)) << f["remedies"].dump(2);
  EXPECT_TRUE(findings(report, "memory-leak").empty()) << "the orphans explain the memory";

  const auto text = host.gpureap({"doctor", "--no-kernel-log"});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("What to do, safest first"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(kill_command), std::string::npos) << text.out;
}

// Drivers before R510 report v1 memory: "used" includes the driver's own reservation, of unknown
// size (the simulated r470 reserves 512 MiB). A healthy GPU is not a critical leak.
TEST(Doctor, HealthyGpuWithV1MemoryIsNotCritical) {
  SimHost host({"--gpus", "2"}, "r470");
  auto job = host.start({"--alloc", "0:1GiB"});
  int rc = -1;
  const auto report = doctor_json(host, {"--settle", "0.3"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(findings(report, "memory-leak").empty()) << report["findings"].dump(2);
  const auto unexplained = findings(report, "memory-unexplained", 0);
  ASSERT_EQ(unexplained.size(), 1u) << report["findings"].dump(2);
  const auto& f = unexplained.front();
  EXPECT_EQ(f["severity"], "info");
  EXPECT_FALSE(f["evidence"]["reserved_bytes_known"].get<bool>());
  EXPECT_EQ(f["evidence"]["memory_source"], "v1");
  EXPECT_NE(f["summary"].get<std::string>().find("v1 memory figures"), std::string::npos) << f.dump(2);
  for (const auto& r : f["remedies"]) EXPECT_NE(r["risk"], "high") << "no reset for what may be the reservation";
}

TEST(Doctor, LeakWithNoHolderIsCriticalAndTheResetAdviceNamesTheNvmlClient) {
  SimHost host;
  auto leaker = host.start({"--alloc", "1:768MiB", "--leak"});
  kill(leaker.pid, SIGKILL);
  leaker.wait_exit();
  auto monitor = host.start({"--nvml-client"});
  ASSERT_TRUE(eventually([&] { return find_process(host.ps_json(), leaker.pid) == nullptr; }));
  int rc = -1;
  const auto report = doctor_json(host, {"--settle", "0.5"}, &rc);
  EXPECT_EQ(rc, 2) << report.dump(2);
  const auto leak = findings(report, "memory-leak", 1);
  ASSERT_EQ(leak.size(), 1u) << report["findings"].dump(2);
  const auto& f = leak.front();
  EXPECT_EQ(f["severity"], "critical");
  EXPECT_EQ(f["evidence"]["unattributed_bytes"], 768 * MiB);
  EXPECT_FALSE(f["evidence"]["falling"].get<bool>());
  EXPECT_FALSE(f["evidence"]["reset"]["ready"].get<bool>());
  bool client_named = false, persistence_named = false;
  for (const auto& b : f["evidence"]["reset"]["blockers"]) {
    if (b["kind"] == "nvml-client" && b["pid"] == monitor.pid) client_named = true;
    if (b["kind"] == "persistence-mode") persistence_named = true;
  }
  EXPECT_TRUE(client_named) << f["evidence"]["reset"].dump(2);
  EXPECT_TRUE(persistence_named) << "the simulated GPU runs with persistence on";
  // Safest first: the reset comes before reloading the module and rebooting.
  ASSERT_GE(f["remedies"].size(), 3u);
  // By UUID, never by an index that a GPU falling off the bus would shift.
  EXPECT_EQ(f["remedies"][0]["command"], "nvidia-smi -r -i " + gpu_entry(host.ps_json(), 1)["uuid"].get<std::string>());
  EXPECT_EQ(f["remedies"][0]["risk"], "high");
  EXPECT_TRUE(findings(report, "memory-leak", 0).empty()) << "GPU 0 is clean";
  EXPECT_TRUE(findings(report, "unlisted-holders").empty()) << "an NVML client holds no memory";
}

TEST(Doctor, DelayedReleaseIsSeenFallingNotCalledALeak) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--release-delay", "2500"});  // margin for a slow (sanitizer) start
  kill(job.pid, SIGKILL);
  job.wait_exit();
  int rc = -1;
  const auto report = doctor_json(host, {"--settle", "6"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  const auto release = findings(report, "release-in-progress", 0);
  ASSERT_EQ(release.size(), 1u) << report["findings"].dump(2);
  const auto& samples = release.front()["evidence"]["samples"];
  ASSERT_GE(samples.size(), 2u);
  EXPECT_EQ(samples.front()["used_bytes"], 1 * GiB);
  EXPECT_EQ(samples.back()["used_bytes"], 0) << "the number fell to zero within the window";
  EXPECT_TRUE(release.front()["evidence"]["falling"].get<bool>());
  EXPECT_TRUE(findings(report, "memory-leak").empty());
}

TEST(Doctor, ZombieChildOfAGpuProcessNamesItsParent) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--zombie-child"});
  int rc = -1;
  const auto report = doctor_json(host, {}, &rc);
  const auto zombies = findings(report, "zombie");
  ASSERT_EQ(zombies.size(), 1u) << report["findings"].dump(2);
  const auto& f = zombies.front();
  EXPECT_EQ(f["evidence"]["parent"]["pid"], job.pid);
  EXPECT_TRUE(f["evidence"]["parent"]["gpu_process"].get<bool>());
  EXPECT_FALSE(f["evidence"]["holds_device_files"].get<bool>());
  EXPECT_EQ(process_state(f["evidence"]["pid"].get<pid_t>()), 'Z');
  EXPECT_TRUE(has_remedy(f, "kill -CHLD " + std::to_string(job.pid))) << f["remedies"].dump(2);
  EXPECT_EQ(f["remedies"][0]["risk"], "none") << "the harmless remedy comes first";
  EXPECT_EQ(rc, 0) << "a zombie holds no memory: information, not a warning";
}

TEST(Doctor, DStateHolderShowsWchanAndThatItDidNotRun) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const FrozenInD frozen(job.pid);
  if (!frozen.why_not.empty()) GTEST_SKIP() << frozen.why_not;
  ASSERT_TRUE(eventually([&] { return process_state(job.pid) == 'D'; })) << "state " << process_state(job.pid);
  int rc = -1;
  const auto report = doctor_json(host, {}, &rc);
  const auto blocked = findings(report, "d-state");
  ASSERT_EQ(blocked.size(), 1u) << report["findings"].dump(2);
  const auto& f = blocked.front();
  EXPECT_EQ(f["evidence"]["pid"], job.pid);
  EXPECT_EQ(f["gpu"], 0);
  EXPECT_FALSE(f["evidence"]["wchan"].get<std::string>().empty());
  EXPECT_TRUE(f["evidence"]["stayed_blocked"].get<bool>());
  EXPECT_TRUE(f["evidence"]["listed_by_driver"].get<bool>());
  // The same debugger command `gpureap run --dump-on-hang` runs (a native program: gdb).
  bool names_gdb = false;
  for (const auto& r : f["remedies"]) {
    names_gdb = names_gdb || r["command"] == "gdb -p " + std::to_string(job.pid) + " -batch -ex 'thread apply all bt'";
  }
  EXPECT_TRUE(names_gdb) << f["remedies"].dump(2);
  EXPECT_EQ(rc, 1);
}

// Reading cmdline, maps or environ of a task in D can hang the reader on its mmap lock: ps and
// doctor show such a process by its comm, and doctor's shared-memory scan skips it and says so.
TEST(Doctor, DStateProcessIsNeverReadForCmdlineOrMaps) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const FrozenInD frozen(job.pid);
  if (!frozen.why_not.empty()) GTEST_SKIP() << frozen.why_not;
  ASSERT_TRUE(eventually([&] { return process_state(job.pid) == 'D'; })) << "state " << process_state(job.pid);
  const auto ps = host.ps_json();
  const auto* p = find_process(ps, job.pid, 0);
  ASSERT_NE(p, nullptr) << ps.dump(2);
  EXPECT_EQ((*p)["command"].get<std::string>().find("--alloc"), std::string::npos)
      << "cmdline was read in D: " << p->dump();
  int rc = -1;
  // A file nobody has open in doctor's private /dev/shm makes it look through every process.
  const auto report = doctor_json(host, {}, &rc, {}, "echo data > /dev/shm/unclaimed");
  bool said = false;
  for (const auto& note : report["notes"]) {
    const std::string text = note.get<std::string>();
    if (text.find(std::to_string(job.pid)) != std::string::npos &&
        text.find("in uninterruptible sleep (D)") != std::string::npos) {
      said = true;
    }
  }
  EXPECT_TRUE(said) << report["notes"].dump(2);
  const auto shm = findings(report, "leftover-posix-shm");
  ASSERT_EQ(shm.size(), 1u) << report["findings"].dump(2);
  const auto blocked = shm.front()["evidence"]["blocked_pids"].get<std::vector<pid_t>>();
  EXPECT_NE(std::find(blocked.begin(), blocked.end(), job.pid), blocked.end()) << shm.front().dump(2);
}

TEST(Doctor, NoDriverIsCritical) {
  SimHost host;
  int rc = -1;
  const auto report = doctor_json(host, {}, &rc, {{"GPUREAP_NVML_LIBRARY", host.state_dir() + "/no/libnvidia-ml.so.1"}});
  EXPECT_EQ(rc, 2);
  const auto f = findings(report, "no-driver");
  ASSERT_EQ(f.size(), 1u) << report.dump(2);
  EXPECT_EQ(f.front()["severity"], "critical");
  EXPECT_FALSE(report["driver"]["loaded"].get<bool>());
}

TEST(Doctor, LibraryAndModuleVersionMismatchIsCritical) {
  SimHost host;
  host.ctl({"fault", "--call", "nvmlInit", "--code", "18"});
  int rc = -1;
  const auto report = doctor_json(host, {}, &rc);
  EXPECT_EQ(rc, 2);
  const auto f = findings(report, "driver-version-mismatch");
  ASSERT_EQ(f.size(), 1u) << report.dump(2);
  EXPECT_EQ(f.front()["evidence"]["nvml_code"], 18);
  EXPECT_TRUE(has_remedy(f.front(), "systemctl reboot"));
}

TEST(Doctor, LostGpuIsCriticalAndTheOtherGpuIsStillChecked) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  host.ctl({"set", "--gpu", "1", "lost=1"});
  int rc = -1;
  const auto report = doctor_json(host, {}, &rc);
  EXPECT_EQ(rc, 2);
  const auto lost = findings(report, "gpu-lost", 1);
  ASSERT_EQ(lost.size(), 1u) << report.dump(2);
  EXPECT_EQ(lost.front()["evidence"]["error"]["name"], "GPU_IS_LOST");
  EXPECT_EQ(report["gpus"][0]["used_bytes"], 1 * GiB);
  EXPECT_TRUE(findings(report, "gpu-lost", 0).empty());
}

TEST(Doctor, PersistenceOffIsInformation) {
  SimHost host;
  host.ctl({"set", "--gpu", "0", "persistence=0"});
  int rc = -1;
  const auto report = doctor_json(host, {}, &rc);
  const auto f = findings(report, "persistence-off", 0);
  ASSERT_EQ(f.size(), 1u) << report.dump(2);
  EXPECT_EQ(f.front()["severity"], "info");
  EXPECT_EQ(rc, 0);
}

TEST(Doctor, InsideAContainerTheDriversHostPidsAreExplained) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  SpawnOptions options;
  options.env = host.env();
  const auto result = run_command({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", gpureap_binary(), "doctor",
                                   "--json", "--no-kernel-log"},
                                  options);
  EXPECT_EQ(result.exit_code, 1) << result.err << result.out;
  const auto report = nlohmann::json::parse(result.out);
  EXPECT_TRUE(report["host"]["in_child_pid_namespace"].get<bool>());
  const auto f = findings(report, "in-container");
  ASSERT_EQ(f.size(), 1u) << report.dump(2);
  ASSERT_EQ(f.front()["evidence"]["foreign_processes"].size(), 1u);
  EXPECT_EQ(f.front()["evidence"]["foreign_processes"][0]["host_pid"], job.pid);
  EXPECT_EQ(f.front()["evidence"]["foreign_processes"][0]["gpu_memory_bytes"], 1 * GiB);
  EXPECT_TRUE(findings(report, "memory-leak").empty()) << "the memory is listed, just not visible here";
}

TEST(Doctor, ProcessInAPidNamespaceSeenFromTheHostIsHealthy) {
  if (!running_as_root()) GTEST_SKIP() << "creating a PID namespace needs root";
  SimHost host;
  auto job = host.start({"--alloc", "0:2GiB", "--pidns"});
  ASSERT_NE(job.ns_pid, job.pid);
  int rc = -1;
  const auto report = doctor_json(host, {}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(findings(report, "unverifiable-pids").empty());
  EXPECT_EQ(report["gpus"][0]["unattributed_bytes"], 0);
}

TEST(Doctor, BadOptionsExitElevenWithWhatToDo) {
  SimHost host;
  auto missing = host.gpureap({"doctor", "--kernel-log", host.state_dir() + "/missing.log"});
  EXPECT_EQ(missing.exit_code, 11);
  EXPECT_NE(missing.err.find("missing.log: cannot read it"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("journalctl -k"), std::string::npos) << missing.err;
  auto only = host.gpureap({"doctor", "--fix", "--only", "everything"});
  EXPECT_EQ(only.exit_code, 11);
  EXPECT_NE(only.err.find("orphaned-holders"), std::string::npos) << "lists the valid ids: " << only.err;
  EXPECT_EQ(host.gpureap({"doctor", "--only", "zombie"}).exit_code, 11);
  EXPECT_EQ(host.gpureap({"doctor", "--no-such-flag"}).exit_code, 11);
}

}  // namespace
}  // namespace gpureap::test
