// The one way gpureap runs a helper with a timeout (watch's notification command, run's
// debuggers, doctor's nvidia-smi): real programs, what they left behind checked in /proc.
#include <gtest/gtest.h>

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "spawn/timed_command.hpp"
#include "spawn_test_support.hpp"

namespace gpureap {
namespace {

using spawn_test::alive;

class TimedCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpureap-timed-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  pid_t read_pid(const std::string& name) const { return spawn_test::read_pid(dir_ + "/" + name); }
  std::string dir_;
};

TEST_F(TimedCommandTest, AtItsTimeoutTheWholeProcessGroupEnds) {
  // As a notification command that forks `( sleep 300 ) &` and then hangs itself.
  TimedCommand command;
  command.argv = {"/bin/sh", "-c",
                  "/bin/sh -c 'echo $$ > " + dir_ + "/inner.pid; exec sleep 300' & exec sleep 300"};
  command.timeout = std::chrono::milliseconds(500);
  const auto start = std::chrono::steady_clock::now();
  const TimedRun run = run_timed_command(command);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(run.outcome, TimedOutcome::TimedOut);
  const pid_t inner = read_pid("inner.pid");
  ASSERT_GT(inner, 0);
  for (int i = 0; i < 100 && alive(inner); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(alive(inner)) << "the background child " << inner << " outlived the command's timeout";
}

TEST_F(TimedCommandTest, ABackgroundChildHoldingTheOutputDoesNotHoldTheCaller) {
  TimedCommand command;
  command.argv = {"/bin/sh", "-c", "echo said; ( exec sleep 3 ) & exit 4"};
  command.timeout = std::chrono::seconds(10);
  const auto start = std::chrono::steady_clock::now();
  const TimedRun run = run_timed_command(command);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(run.outcome, TimedOutcome::Exited);
  EXPECT_EQ(run.exit_status, 4);
  EXPECT_EQ(run.output, "said\n");
}

TEST_F(TimedCommandTest, InputOutputAndTheirBounds) {
  TimedCommand command;
  command.argv = {"/bin/sh", "-c", "cat; echo to-stderr >&2; head -c 100000 /dev/zero"};
  command.give_input = true;
  command.input = "the event\n";
  command.max_output_bytes = 1000;
  TimedRun run = run_timed_command(command);
  EXPECT_TRUE(run.ok()) << describe_timed_run(run, command.timeout);
  EXPECT_EQ(run.output.size(), 1000u);
  EXPECT_EQ(run.output.rfind("the event\nto-stderr\n", 0), 0u) << run.output.substr(0, 40);

  command.capture_stderr_only = true;  // watch keeps only what its command says on stderr
  run = run_timed_command(command);
  EXPECT_EQ(run.output, "to-stderr\n");
}

TEST_F(TimedCommandTest, ItStartsWithNoSignalBlockedOrIgnoredAndInAGroupOfItsOwn) {
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &block, &old), 0);
  struct sigaction ignore {}, old_pipe {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &old_pipe);
  TimedCommand command;
  command.argv = {"/bin/sh", "-c", "grep -E '^(SigBlk|SigIgn)' /proc/self/status; cut -d' ' -f5 /proc/$$/stat; echo $$"};
  const TimedRun run = run_timed_command(command);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  sigaction(SIGPIPE, &old_pipe, nullptr);
  ASSERT_TRUE(run.ok()) << run.output;
  EXPECT_NE(run.output.find("SigBlk:\t0000000000000000"), std::string::npos) << run.output;
  // SIGPIPE is bit 13 (0x1000): a shell may ignore others of its own, never this one.
  const auto ign = run.output.find("SigIgn:\t");
  ASSERT_NE(ign, std::string::npos);
  EXPECT_EQ(std::stoull(run.output.substr(ign + 8, 16), nullptr, 16) & 0x1000u, 0u) << run.output;
  std::istringstream words(run.output.substr(run.output.find('\n', run.output.find("SigIgn")) + 1));
  long pgid = 0, pid = 0;
  words >> pgid >> pid;
  EXPECT_EQ(pgid, pid) << "the helper leads its own process group";
}

TEST_F(TimedCommandTest, OnlyAbsolutePathsAreRun) {
  const std::string program = dir_ + "/helper";
  std::ofstream(program) << "#!/bin/sh\ntouch " << dir_ << "/ran\n";
  ::chmod(program.c_str(), 0755);
  const std::string old_path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  const auto old_cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir_);
  ::setenv("PATH", ".::relative", 1);
  TimedCommand command;
  command.argv = {"helper"};
  const TimedRun by_name = run_timed_command(command);
  command.argv = {"./helper"};
  const TimedRun relative = run_timed_command(command);
  ::setenv("PATH", (dir_ + ":" + old_path).c_str(), 1);
  command.argv = {"helper"};
  const TimedRun absolute_entry = run_timed_command(command);
  ::setenv("PATH", old_path.c_str(), 1);
  std::filesystem::current_path(old_cwd);
  EXPECT_EQ(by_name.outcome, TimedOutcome::NotStarted);
  EXPECT_NE(by_name.error.find("helper is not installed"), std::string::npos) << by_name.error;
  EXPECT_EQ(relative.outcome, TimedOutcome::NotStarted);
  EXPECT_NE(relative.error.find("absolute path"), std::string::npos) << relative.error;
  EXPECT_TRUE(absolute_entry.ok()) << absolute_entry.error;
  EXPECT_EQ(absolute_entry.program, program);
}

}  // namespace
}  // namespace gpureap
