// What `gpureap kill` selects, with real processes: a refused target is never replaced by its
// tree or group, and --holders takes only holders whose job is provably over.
#include <pwd.h>
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

// A shell script called `name` (its comm) running `body` with $SIM (gpusim-cuda) and $READY
// (<state>/<name>.ready, where the GPU process it starts writes its READY line). Ended (whole
// group) on destruction.
struct Launcher {
  pid_t pid = -1;    // the script
  pid_t child = -1;  // the GPU process it started
  ~Launcher() {
    if (pid > 0) {
      kill(-pid, SIGKILL);
      if (child > 0) kill(child, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
};

void start_launcher(const SimHost& host, const std::string& name, const std::string& body, Launcher& launcher) {
  const std::string script = host.state_dir() + "/" + name;
  const std::string ready = script + ".ready";
  std::ofstream(script) << "#!/bin/sh\nSIM='" << GPUSIM_CUDA_BINARY << "'\nREADY='" << ready << "'\n" << body << "\n";
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    for (const auto& [k, v] : host.env()) setenv(k.c_str(), v.c_str(), 1);
    execl(script.c_str(), name.c_str(), nullptr);
    _exit(127);
  }
  setpgid(child, child);
  launcher.pid = child;
  std::string line;
  ASSERT_TRUE(eventually([&] {
    std::ifstream in(ready);
    return std::getline(in, line) && line.rfind("READY", 0) == 0;
  }, 10000)) << ready;
  launcher.child = static_cast<pid_t>(std::stol(line.substr(line.find("pid=") + 4)));
}

const char* kOneGpuProcess = "\"$SIM\" --alloc 0:1GiB > \"$READY\" &\nwait";

TEST(KillSelection, KillOneSignalsNothingAndEveryGpuProcessSurvives) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  auto other = host.start({"--alloc", "1:1GiB"});
  for (const std::vector<std::string>& extra : {std::vector<std::string>{}, {"--group"}}) {
    std::vector<std::string> args = {"1", "--yes"};
    args.insert(args.end(), extra.begin(), extra.end());
    int rc = -1;
    const auto report = kill_json(host, args, &rc);
    EXPECT_EQ(rc, 8) << report.dump(2);
    ASSERT_EQ(report["targets"].size(), 1u) << "only PID 1 itself, refused: " << report["targets"].dump(2);
    EXPECT_EQ(report["targets"][0]["refusal"]["kind"], "pid-1");
    EXPECT_TRUE(running(job.pid));
    EXPECT_TRUE(running(job.workers.at(0)));
    EXPECT_TRUE(running(other.pid));
  }
}

TEST(KillSelection, ProtectedParentIsNotReplacedByItsGpuChild) {
  SimHost host;
  Launcher launcher;
  ASSERT_NO_FATAL_FAILURE(start_launcher(host, "gpulauncher", kOneGpuProcess, launcher));
  // Protected by a name on the command line, then by the configuration file.
  const std::string config = host.config_dir() + "/config.toml";
  std::ofstream(config) << "[kill]\nprotect = [\"gpulaunch*\"]\n";
  const std::vector<std::pair<std::vector<std::string>, std::map<std::string, std::string>>> ways = {
      {{"--protect", "gpulauncher"}, {}}, {{}, {{"GPUREAP_CONFIG", config}}}};
  for (const auto& [extra, env] : ways) {
    std::vector<std::string> args = {std::to_string(launcher.pid), "--yes"};
    args.insert(args.end(), extra.begin(), extra.end());
    int rc = -1;
    const auto report = kill_json(host, args, &rc, nullptr, env);
    EXPECT_EQ(rc, 8) << report.dump(2);
    const auto* t = kill_target(report, launcher.pid);
    ASSERT_NE(t, nullptr) << report.dump(2);
    EXPECT_EQ((*t)["refusal"]["kind"], "protected");
    EXPECT_EQ(kill_target(report, launcher.child), nullptr) << "the child is not taken in its place";
    EXPECT_TRUE(running(launcher.child));
    EXPECT_TRUE(running(launcher.pid));
  }
}

// A DataLoader-style running job and a dead job whose worker keeps its context: --holders ends
// the dead job's worker only.
TEST(KillSelection, HoldersEndsADeadJobsOrphanAndLeavesARunningJobsWorkersAlone) {
  SimHost host;
  auto running_job = host.start({"--alloc", "0:1GiB", "--workers", "2"});
  auto dead_job = host.start({"--alloc", "0:2GiB", "--workers", "1"});
  ASSERT_EQ(dead_job.workers.size(), 1u);
  ASSERT_EQ(kill(dead_job.pid, SIGKILL), 0);
  dead_job.wait_exit();
  const pid_t orphan = dead_job.workers[0];
  int rc = -1;
  const auto report = kill_json(host, {"--holders", "--yes", "--verify-timeout", "5"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  const auto* t = kill_target(report, orphan);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["outcome"], "exited");
  EXPECT_FALSE(running(orphan));
  EXPECT_EQ(kill_target(report, running_job.pid), nullptr) << report.dump(2);
  for (pid_t w : running_job.workers) {
    EXPECT_EQ(kill_target(report, w), nullptr) << "a running job's worker was planned: " << report.dump(2);
    EXPECT_TRUE(running(w));
  }
  EXPECT_TRUE(running(running_job.pid));
  EXPECT_EQ(gpu_entry(host.ps_json(), 0)["memory"]["used_bytes"], 1 * GiB) << "the running job's memory remains";
}


// Protection by what a user cannot forge: a process that merely calls itself Xorg, or a user's
// own executable named Xorg, is ended like any other; root's nvidia-smi stays protected.
TEST(KillSelection, ProcessesCallingThemselvesXorgAreNotProtected) {
  if (!running_as_root()) GTEST_SKIP() << "needs root to run a process as another user";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  const uid_t user = pw->pw_uid;
  SimHost host;
  auto named = host.start({"--name", "Xorg", "--alloc", "0:1GiB"});                 // comm only, root
  auto users = host.start_program(host.sim_binary_named("Xorg"), {"--alloc", "0:1GiB"}, user);  // exe, a user's
  auto smi = host.start_program(host.sim_binary_named("nvidia-smi"), {"--alloc", "1:1GiB"});   // exe, root
  int rc = -1;
  const auto report = kill_json(host, {"--all", "--yes"}, &rc);
  EXPECT_EQ(rc, 8) << report.dump(2);
  for (pid_t pid : {named.pid, users.pid}) {
    const auto* t = kill_target(report, pid);
    ASSERT_NE(t, nullptr) << pid << report.dump(2);
    EXPECT_EQ((*t)["outcome"], "exited") << t->dump(2);
    EXPECT_FALSE(running(pid));
  }
  const auto* t = kill_target(report, smi.pid);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["refusal"]["kind"], "protected");
  EXPECT_TRUE(running(smi.pid));
}

// A descendant calling itself Xorg does not switch off the freeze sweep of its tree.
TEST(KillSelection, ADescendantNamedXorgDoesNotDisableTheSweep) {
  SimHost host;
  Launcher launcher;
  ASSERT_NO_FATAL_FAILURE(start_launcher(
      host, "jobscript", "\"$SIM\" --name Xorg > /dev/null &\n\"$SIM\" --alloc 0:1GiB > \"$READY\" &\nwait", launcher));
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(launcher.pid), "--yes"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  for (const auto& note : report["notes"]) {
    EXPECT_EQ(note.get<std::string>().find("not swept"), std::string::npos) << note;
  }
  EXPECT_FALSE(running(launcher.child));
}

}  // namespace
}  // namespace gpureap::test
