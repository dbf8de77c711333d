// Stopping never spreads: runuser and su wait for their child with
// WUNTRACED and stop themselves when it stops. gpureap's SIGSTOP of the target must not leave
// such a parent (root, not in the plan) stopped for good with its child an unreaped zombie.
// Real runuser and su, the real binary.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "tmux_screen.hpp"

namespace gpureap::test {
namespace {

// The audit log's sync made slow keeps the job stopped long enough for its parent to see the
// stop, however loaded the machine (ctest -j4 beside other builds).
std::map<std::string, std::string> slow_sync(const SimHost& host) {
  return {{"GPUREAP_AUDIT_LOG", host.state_dir() + "/audit.log"},
          {"LD_PRELOAD", SLOW_FDATASYNC_LIBRARY},
          {"GPUREAP_TEST_FDATASYNC_MS", "100"}};
}

// Kills the program started through `switcher` (a SIGTERM it ignores, so that it stays stopped
// long enough for the parent to mirror the stop, then SIGKILL) and checks the parent was
// continued, said so, reaped its child and exited.
void kill_leaves_parent_running(const std::vector<std::string>& switcher, const std::string& parent_comm) {
  if (!running_as_root() || access(switcher[0].c_str(), X_OK) != 0) GTEST_SKIP() << "needs root and " << switcher[0];
  ASSERT_NE(test_user(), nullptr);
  SimHost host;
  auto job = host.start_through(switcher, {"--alloc", "0:1GiB", "--on-sigterm", "ignore"});
  ASSERT_GT(job.pid, 0) << job.ready_line;
  ASSERT_NE(job.pid, job.launcher_pid) << "the program runs as the switcher's child";
  int rc = -1;
  std::string err;
  const auto report = host.gpureap_json({"kill", std::to_string(job.pid), "--yes", "--timeout", "0.3", "--json"},
                                        &rc, slow_sync(host), &err);
  EXPECT_EQ(rc, 0) << report.dump(2) << err;
  const auto* t = kill_target(report, job.pid);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["outcome"], "killed");
  ASSERT_TRUE((*t)["resumed_parent"].is_object()) << report.dump(2);
  EXPECT_EQ((*t)["resumed_parent"]["pid"], job.launcher_pid);
  EXPECT_EQ((*t)["resumed_parent"]["comm"], parent_comm);
  // Continued, the parent reaps its child and exits with its status, as without gpureap.
  const int status = job.wait_exit(3000);
  ASSERT_NE(status, -1) << parent_comm << " did not exit; state " << process_state(job.launcher_pid);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_FALSE(running(job.pid));
}

TEST(KillStopMirror, RunuserParentIsContinuedAndReapsItsChild) {
  kill_leaves_parent_running({"/usr/sbin/runuser", "-u", kTestUserName, "--"}, "runuser");
}

TEST(KillStopMirror, SuParentIsContinuedAndReapsItsChild) {
  // The test user's shell is nologin: -s names one; "$0" "$@" are the program and its options.
  kill_leaves_parent_running({"/bin/su", "-s", "/bin/sh", "-c", "exec \"$0\" \"$@\"", "--", kTestUserName}, "su");
}

// An interactive shell with job control in a terminal (tmux) runs the job in the foreground;
// gpureap kill stops it on the way to SIGKILL, so the shell sees its job stop and takes the
// terminal back. Once the job is killed the shell is not stopped and answers what is typed.
TEST(KillStopMirror, AnInteractiveShellWhoseChildIsKilledIsNotLeftStopped) {
  if (!TmuxScreen::available() || access("/bin/bash", X_OK) != 0) GTEST_SKIP() << "needs tmux and bash";
  SimHost host;
  auto env = host.env();
  env["PS1"] = "prompt$ ";
  TmuxScreen shell({"/bin/bash", "--norc", "--noprofile", "-i"}, env, 120, 30, host.state_dir());
  ASSERT_TRUE(shell.wait_for("prompt$")) << shell.text();
  shell.type(std::string(GPUSIM_CUDA_BINARY) + " --alloc 0:1GiB --on-sigterm ignore");
  shell.keys({"Enter"});
  ASSERT_TRUE(shell.wait_for("READY pid=")) << shell.text();
  const std::string ready = line_with(shell.text(), "READY pid=");
  const pid_t job = static_cast<pid_t>(std::stol(ready.substr(ready.find("pid=") + 4)));
  ASSERT_GT(job, 1) << ready;
  const std::string stat = read_text_file("/proc/" + std::to_string(job) + "/stat");
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  char state = '?';
  pid_t bash = 0;
  fields >> state >> bash;
  ASSERT_GT(bash, 1);
  int rc = -1;
  const auto report = host.gpureap_json({"kill", std::to_string(job), "--yes", "--timeout", "0.3", "--json"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(job); }));
  EXPECT_NE(process_state(bash), 'T') << "the shell was left stopped";
  shell.type("echo alive-$((40+2))");
  shell.keys({"Enter"});
  EXPECT_TRUE(shell.wait_for("alive-42", 3000)) << "the shell does not answer:\n" << shell.text();
  EXPECT_NE(process_state(bash), 'T') << "the shell was left stopped";
}

// The same through the text report a person reads.
TEST(KillStopMirror, TextReportNamesTheResumedParent) {
  if (!running_as_root() || access("/usr/sbin/runuser", X_OK) != 0) GTEST_SKIP() << "needs root and runuser";
  ASSERT_NE(test_user(), nullptr);
  SimHost host;
  auto job = host.start_through({"/usr/sbin/runuser", "-u", kTestUserName, "--"},
                                {"--alloc", "0:1GiB", "--on-sigterm", "ignore"});
  ASSERT_GT(job.pid, 0) << job.ready_line;
  const auto result = host.gpureap({"kill", std::to_string(job.pid), "--yes", "--timeout", "0.3"}, slow_sync(host));
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("resumed runuser (PID " + std::to_string(job.launcher_pid) + "), stopped when its child was"),
            std::string::npos)
      << result.out;
  EXPECT_NE(job.wait_exit(3000), -1) << "runuser left in state " << process_state(job.launcher_pid);
}

}  // namespace
}  // namespace gpureap::test
