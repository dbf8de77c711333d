// `gpureap kill` against real simulated CUDA processes: the ladder (SIGTERM, wait, SIGKILL),
// trees of workers that inherit the descriptors, process groups, stopped processes, zombies,
// and the verification that the driver released the memory.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(Kill, ProcessThatExitsOnSigtermEndsAndItsMemoryIsVerifiedFree) {
  SimHost host;
  auto job = host.start({"--alloc", "0:2GiB"});
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(job.pid), "--yes"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_EQ(report["schema"], "gpureap.kill/1");
  const auto* t = kill_target(report, job.pid);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["outcome"], "exited");
  EXPECT_TRUE(has_signal(*t, "SIGTERM"));
  EXPECT_FALSE(has_signal(*t, "SIGKILL"));
  ASSERT_TRUE((*t)["exit_ms"].is_number());
  EXPECT_LT((*t)["exit_ms"].get<double>(), 1000.0);
  const auto* g = kill_gpu(report, 0);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ((*g)["expected_free_bytes"], 2 * GiB);
  EXPECT_TRUE((*g)["verified"].get<bool>());
  EXPECT_EQ((*g)["freed_bytes"], 2 * GiB);
  EXPECT_TRUE((*g)["still_held_by"].empty());
  const int status = job.wait_exit(2000);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "it ended through its own SIGTERM handler";
  EXPECT_EQ(gpu_entry(host.ps_json(), 0)["memory"]["used_bytes"], 0);
}

TEST(Kill, IgnoredSigtermIsFollowedBySigkillAfterTheTimeout) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--on-sigterm", "ignore"});
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(job.pid), "--yes", "--timeout", "0.5"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  const auto* t = kill_target(report, job.pid);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ((*t)["outcome"], "killed");
  EXPECT_TRUE(has_signal(*t, "SIGTERM"));
  EXPECT_TRUE(has_signal(*t, "SIGKILL"));
  // Measured from the SIGKILL that ended it, not from the SIGTERM it ignored 0.5 s earlier.
  EXPECT_LT((*t)["exit_ms"].get<double>(), 400.0);
  EXPECT_TRUE((*kill_gpu(report, 0))["verified"].get<bool>());
  const int status = job.wait_exit(2000);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST(Kill, NoEscalateLeavesASurvivorAndSaysSo) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--on-sigterm", "ignore"});
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(job.pid), "--yes", "--timeout", "0.2", "--no-escalate"}, &rc);
  EXPECT_EQ(rc, 6) << report.dump(2);
  const auto* t = kill_target(report, job.pid);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ((*t)["outcome"], "survived");
  EXPECT_FALSE(has_signal(*t, "SIGKILL"));
  const auto* g = kill_gpu(report, 0);
  EXPECT_FALSE((*g)["verified"].get<bool>());
  EXPECT_EQ((*g)["still_held_by"], nlohmann::json::array({job.pid}));
  EXPECT_TRUE(running(job.pid));
}

TEST(Kill, SlowExitWithinTheTimeoutNeedsNoSigkill) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--on-sigterm", "slow:300"});
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(job.pid), "--yes", "--timeout", "5"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  const auto* t = kill_target(report, job.pid);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ((*t)["outcome"], "exited");
  EXPECT_FALSE(has_signal(*t, "SIGKILL"));
  EXPECT_GE((*t)["exit_ms"].get<double>(), 250.0);
  EXPECT_LT((*t)["exit_ms"].get<double>(), 2500.0);
  EXPECT_TRUE((*kill_gpu(report, 0))["verified"].get<bool>());
}

TEST(Kill, ParentAloneLeavesTheMemoryHeldByTheWorkerThatInheritedItsDescriptors) {
  SimHost host;
  auto job = host.start({"--alloc", "0:4GiB", "--workers", "1"});
  ASSERT_EQ(job.workers.size(), 1u);
  const pid_t worker = job.workers[0];
  int rc = -1;
  const auto report =
      kill_json(host, {std::to_string(job.pid), "--yes", "--no-tree", "--verify-timeout", "1"}, &rc);
  EXPECT_EQ(rc, 6) << report.dump(2);
  EXPECT_EQ((*kill_target(report, job.pid))["outcome"], "exited");
  EXPECT_EQ(kill_target(report, worker), nullptr) << "--no-tree: the worker is not a target";
  const auto* g = kill_gpu(report, 0);
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE((*g)["verified"].get<bool>());
  EXPECT_EQ((*g)["still_held_by"], nlohmann::json::array({worker})) << g->dump(2);
  EXPECT_NE((*g)["message"].get<std::string>().find(std::to_string(worker)), std::string::npos);
  EXPECT_TRUE(running(worker));

  // Text output names the holder too.
  auto second = host.start({"--alloc", "1:1GiB", "--workers", "1"});
  const auto text = host.gpureap({"kill", std::to_string(second.pid), "--yes", "--no-tree", "--verify-timeout", "0.5"});
  EXPECT_EQ(text.exit_code, 6);
  EXPECT_NE(text.out.find("still held by PID " + std::to_string(second.workers.at(0))), std::string::npos) << text.out;
  kill(worker, SIGKILL);
  kill(second.workers.at(0), SIGKILL);
}

TEST(Kill, TheTreeIncludesWorkersAndAllTheMemoryIsVerifiedFree) {
  SimHost host;
  auto job = host.start({"--alloc", "0:4GiB", "--workers", "2"});
  ASSERT_EQ(job.workers.size(), 2u);
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(job.pid), "--yes", "--verify-timeout", "5"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  for (pid_t pid : {job.pid, job.workers[0], job.workers[1]}) {
    const auto* t = kill_target(report, pid);
    ASSERT_NE(t, nullptr) << pid << "\n" << report.dump(2);
    EXPECT_EQ((*t)["outcome"], "exited");
    EXPECT_FALSE(running(pid));
  }
  const auto* worker = kill_target(report, job.workers[0]);
  EXPECT_EQ((*worker)["via"], job.pid);
  EXPECT_NE((*worker)["reason"].get<std::string>().find("nvidia0"), std::string::npos);
  const auto* g = kill_gpu(report, 0);
  EXPECT_TRUE((*g)["verified"].get<bool>());
  EXPECT_EQ((*g)["freed_bytes"], 4 * GiB);
}

TEST(Kill, HoldersSelectsOrphanedWorkersAndTheirMemoryComesBack) {
  SimHost host;
  auto job = host.start({"--alloc", "0:3GiB", "--workers", "2"});
  ASSERT_EQ(kill(job.pid, SIGKILL), 0);  // the classic leak: the owner dies, its workers keep the memory
  job.wait_exit();
  int rc = -1;
  const auto report = kill_json(host, {"--holders", "--gpu", "0", "--yes", "--verify-timeout", "5"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  for (pid_t worker : job.workers) {
    const auto* t = kill_target(report, worker);
    ASSERT_NE(t, nullptr) << worker << "\n" << report.dump(2);
    EXPECT_EQ((*t)["outcome"], "exited");
    EXPECT_NE((*t)["reason"].get<std::string>().find("keeps the context of exited PID " + std::to_string(job.pid)),
              std::string::npos)
        << (*t)["reason"];
  }
  EXPECT_EQ(kill_target(report, job.pid), nullptr) << "the dead owner's listed PID is not a target";
  const auto* g = kill_gpu(report, 0);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ((*g)["orphaned_bytes"], 3 * GiB);
  EXPECT_EQ((*g)["expected_free_bytes"], 3 * GiB);
  EXPECT_TRUE((*g)["verified"].get<bool>());
  EXPECT_EQ((*g)["freed_bytes"], 3 * GiB);
}

// A launcher that puts 4 ranks (each with a worker) in its own process group, like mpirun or
// torchrun; the ranks' READY lines go to files.
struct RankJob {
  pid_t launcher = -1;
  std::vector<pid_t> ranks, workers;
  ~RankJob() {
    if (launcher > 0) {
      kill(-launcher, SIGKILL);
      for (pid_t p : ranks) kill(p, SIGKILL);
      for (pid_t p : workers) kill(p, SIGKILL);
      waitpid(launcher, nullptr, 0);
    }
  }
};

void start_ranks(const SimHost& host, RankJob& job) {
  const std::string script =
      "for i in 0 1 2 3; do \"$0\" --alloc 0:1GiB --workers 1 > \"$1/rank$i\" & done; wait";
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    for (const auto& [k, v] : host.env()) setenv(k.c_str(), v.c_str(), 1);
    execl("/bin/sh", "sh", "-c", script.c_str(), GPUSIM_CUDA_BINARY, host.state_dir().c_str(), nullptr);
    _exit(127);
  }
  setpgid(child, child);
  job.launcher = child;
  for (int i = 0; i < 4; ++i) {
    const std::string path = host.state_dir() + "/rank" + std::to_string(i);
    std::string line;
    ASSERT_TRUE(eventually([&] {
      std::ifstream in(path);
      return std::getline(in, line) && line.rfind("READY", 0) == 0;
    }, 10000)) << path;
    const auto pid_at = line.find("pid=") + 4;
    job.ranks.push_back(static_cast<pid_t>(std::stol(line.substr(pid_at))));
    const auto workers_at = line.find("workers=") + 8;
    job.workers.push_back(static_cast<pid_t>(std::stol(line.substr(workers_at))));
  }
}

TEST(Kill, GroupEndsEveryRankAndWorkerOfAFourRankJob) {
  SimHost host;
  RankJob job;
  ASSERT_NO_FATAL_FAILURE(start_ranks(host, job));
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(job.ranks[2]), "--group", "--yes"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(report["group"].get<bool>());
  for (pid_t pid : job.ranks) {
    const auto* t = kill_target(report, pid);
    ASSERT_NE(t, nullptr) << pid << "\n" << report.dump(2);
    EXPECT_EQ((*t)["outcome"], "exited");
    EXPECT_EQ((*t)["pgid"], job.launcher);
  }
  for (pid_t pid : job.workers) {
    ASSERT_NE(kill_target(report, pid), nullptr) << pid;
    EXPECT_FALSE(running(pid));
  }
  ASSERT_NE(kill_target(report, job.launcher), nullptr) << "the launcher is in the group";
  const auto* g = kill_gpu(report, 0);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ((*g)["expected_free_bytes"], 4 * GiB);
  EXPECT_TRUE((*g)["verified"].get<bool>()) << g->dump(2);
  EXPECT_EQ((*g)["freed_bytes"], 4 * GiB);
}

TEST(Kill, StoppedProcessIsContinuedSoItCanHandleSigterm) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  ASSERT_EQ(kill(job.pid, SIGSTOP), 0);
  ASSERT_TRUE(eventually([&] { return process_state(job.pid) == 'T'; }));
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(job.pid), "--yes", "--timeout", "3"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  const auto* t = kill_target(report, job.pid);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ((*t)["state"], "T");
  EXPECT_EQ((*t)["outcome"], "exited") << "SIGCONT after SIGTERM lets its handler run";
  EXPECT_TRUE(has_signal(*t, "SIGCONT"));
  EXPECT_FALSE(has_signal(*t, "SIGKILL"));
  const int status = job.wait_exit(2000);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

pid_t zombie_child_of(pid_t parent) {
  pid_t found = -1;
  eventually([&] {
    std::ifstream children("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
    pid_t child = 0;
    while (children >> child) {
      if (process_state(child) == 'Z') {
        found = child;
        return true;
      }
    }
    return false;
  });
  return found;
}

TEST(Kill, ZombieIsReportedWithItsParentAndReapZombiesSignalsTheParent) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--zombie-child"});
  const pid_t zombie = zombie_child_of(job.pid);
  ASSERT_GT(zombie, 0);
  int rc = -1;
  auto report = kill_json(host, {std::to_string(zombie), "--yes"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  const auto* t = kill_target(report, zombie);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ((*t)["outcome"], "zombie");
  EXPECT_TRUE((*t)["signals"].empty());
  EXPECT_NE((*t)["detail"].get<std::string>().find(std::to_string(job.pid)), std::string::npos) << t->dump(2);
  EXPECT_TRUE(running(job.pid)) << "the parent was not selected";

  const std::string log = host.state_dir() + "/audit.log";
  report = kill_json(host, {std::to_string(zombie), "--yes", "--reap-zombies", "--audit-log", log}, &rc);
  EXPECT_EQ(rc, 0);
  t = kill_target(report, zombie);
  ASSERT_NE(t, nullptr);
  EXPECT_NE((*t)["detail"].get<std::string>().find("SIGCHLD sent to its parent PID " + std::to_string(job.pid)),
            std::string::npos)
      << t->dump(2);
  std::ifstream in(log);
  std::string line;
  bool sigchld = false;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["signal"] == "SIGCHLD" && j["pid"] == job.pid && j["stage"] == "sent") sigchld = true;
  }
  EXPECT_TRUE(sigchld);
  EXPECT_TRUE(running(job.pid));

  // Selecting the parent ends it; its zombie child comes with the tree (same process group).
  report = kill_json(host, {std::to_string(job.pid), "--yes", "--reap-zombies"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_EQ((*kill_target(report, job.pid))["outcome"], "exited");
  ASSERT_NE(kill_target(report, zombie), nullptr);
  EXPECT_EQ((*kill_target(report, zombie))["outcome"], "zombie");
  EXPECT_TRUE((*kill_gpu(report, 0))["verified"].get<bool>());
}

TEST(Kill, DryRunSignalsNothing) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(job.pid), "--dry-run"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(report["dry_run"].get<bool>());
  const auto* t = kill_target(report, job.pid);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ((*t)["outcome"], "planned");
  EXPECT_TRUE((*t)["signals"].empty());
  EXPECT_NE(kill_target(report, job.workers.at(0)), nullptr);
  EXPECT_EQ((*kill_gpu(report, 0))["expected_free_bytes"], 1 * GiB);
  poll(nullptr, 0, 200);
  EXPECT_TRUE(running(job.pid));
  EXPECT_TRUE(running(job.workers[0]));

  const auto text = host.gpureap({"kill", std::to_string(job.pid), "--dry-run"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("[dry run] Plan: 2 processes"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("named on the command line"), std::string::npos);
  EXPECT_TRUE(running(job.pid));
}

TEST(Kill, LeakedMemoryThatNeverFreesFailsVerificationWithAClearMessage) {
  SimHost host;
  auto job = host.start({"--alloc", "0:2GiB", "--leak"});
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(job.pid), "--yes", "--verify-timeout", "1"}, &rc);
  EXPECT_EQ(rc, 6) << report.dump(2);
  EXPECT_EQ((*kill_target(report, job.pid))["outcome"], "exited");
  const auto* g = kill_gpu(report, 0);
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE((*g)["verified"].get<bool>());
  EXPECT_TRUE((*g)["still_held_by"].empty());
  const std::string message = (*g)["message"];
  EXPECT_NE(message.find("no holder"), std::string::npos) << message;
  EXPECT_NE(message.find("gpureap doctor"), std::string::npos) << message;
  EXPECT_NE(message.find("2.0 GiB"), std::string::npos) << message;
}

TEST(Kill, AuditLogHasOneWellFormedLinePerSignalAndMode0600) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--on-sigterm", "ignore"});
  const std::string log = host.state_dir() + "/audit/kill.log";
  mkdir((host.state_dir() + "/audit").c_str(), 0700);
  int rc = -1;
  const auto report =
      kill_json(host, {std::to_string(job.pid), "--yes", "--timeout", "0.3", "--audit-log", log}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  struct stat st {};
  ASSERT_EQ(stat(log.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::ifstream in(log);
  std::string line;
  std::vector<std::string> sent;
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    const auto j = nlohmann::json::parse(line);  // throws (fails the test) when malformed
    for (const char* key : {"time", "stage", "pid", "start_time_ticks", "signal", "reason", "requested_by", "result"}) {
      EXPECT_TRUE(j.contains(key)) << key << " missing: " << line;
    }
    EXPECT_EQ(j["pid"], job.pid);
    EXPECT_GT(j["start_time_ticks"].get<unsigned long long>(), 0u);
    EXPECT_EQ(j["requested_by"]["uid"], geteuid());
    EXPECT_TRUE(j["requested_by"].contains("user"));
    EXPECT_EQ(j["time"].get<std::string>().back(), 'Z');
    if (j["stage"] == "sent") {
      EXPECT_EQ(j["result"], "delivered");
      sent.push_back(j["signal"]);
    } else {
      EXPECT_EQ(j["result"], "pending");
    }
  }
  EXPECT_EQ(lines % 2, 0) << "a 'sending' and a 'sent' line for each signal";
  ASSERT_GE(sent.size(), 2u);
  EXPECT_NE(std::find(sent.begin(), sent.end(), "SIGTERM"), sent.end());
  EXPECT_EQ(sent.back(), "SIGKILL");

  // An audit log that cannot be opened stops gpureap before it signals anything.
  auto other = host.start({"--alloc", "0:1GiB"});
  const auto refused = host.gpureap({"kill", std::to_string(other.pid), "--yes", "--audit-log",
                                     host.state_dir() + "/no/such/dir/log"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("nothing was signalled"), std::string::npos) << refused.err;
  EXPECT_TRUE(running(other.pid));
}

}  // namespace
}  // namespace gpureap::test
