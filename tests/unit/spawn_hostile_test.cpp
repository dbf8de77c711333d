// The one start of every program gpureap runs (spawn/process_start.hpp) tried as a hostile
// user would: a file swapped after the check, descriptors and limits left for the program to
// use, credentials that are not really dropped, and descendants that try to outlive it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "spawn/timed_command.hpp"
#include "spawn_test_support.hpp"

extern char** environ;

namespace gpureap {
namespace {

using spawn_test::alive;

class SpawnHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpureap-spawn-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
    ::chmod(dir_.c_str(), 0755);
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string script(const std::string& name, const std::string& body) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }
  pid_t read_pid(const std::string& name) const { return spawn_test::read_pid(dir_ + "/" + name); }
  bool exists(const std::string& name) const { return std::filesystem::exists(dir_ + "/" + name); }
  std::string dir_;
};

// Alive and not a zombie. The helper's keeper reaps all it ends before run_timed_command
// returns, so a descendant still listed here is one that survived.

// A process of the test's own, started beside the helper: the same user, not its descendant.
struct Bystander {
  pid_t pid = -1;
  Bystander() {
    char sleep_path[] = "/bin/sleep";
    char seconds[] = "300";
    char* argv[] = {sleep_path, seconds, nullptr};
    ::posix_spawn(&pid, sleep_path, nullptr, nullptr, argv, environ);
  }
  ~Bystander() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

TEST_F(SpawnHostileTest, ASymlinkSwappedAfterTheCheckCannotChangeWhatRuns) {
  const std::string checked = script("checked", "touch " + dir_ + "/checked-ran");
  const std::string other = script("other", "touch " + dir_ + "/other-ran");
  const std::string link = dir_ + "/nvidia-cuda-mps-control";
  ASSERT_EQ(::symlink(checked.c_str(), link.c_str()), 0);
  std::string why;
  const auto fd = open_program(link, why);
  ASSERT_TRUE(fd) << why;
  // The user swaps the link between gpureap's check and its exec.
  ASSERT_EQ(::unlink(link.c_str()), 0);
  ASSERT_EQ(::symlink(other.c_str(), link.c_str()), 0);
  TimedCommand command;
  command.argv = {"nvidia-cuda-mps-control"};
  command.program_fd = fd.get();
  const TimedRun run = run_timed_command(command);
  EXPECT_TRUE(run.ok()) << describe_timed_run(run, command.timeout) << " " << run.output;
  EXPECT_TRUE(exists("checked-ran"));
  EXPECT_FALSE(exists("other-ran")) << "the file swapped in after the check was run";
  EXPECT_EQ(run.program, checked);
}

TEST_F(SpawnHostileTest, ADirectoryOrAFileNobodyMayRunIsRefusedOnItsDescriptor) {
  std::string why;
  EXPECT_FALSE(open_program(dir_, why));
  EXPECT_NE(why.find("is not a regular file"), std::string::npos) << why;
  const std::string plain = dir_ + "/plain";
  std::ofstream(plain) << "#!/bin/sh\n";
  ::chmod(plain.c_str(), 0644);
  EXPECT_FALSE(open_program(plain, why));
  EXPECT_NE(why.find("Permission denied"), std::string::npos) << why;
}

TEST_F(SpawnHostileTest, RunAsReallyDropsToTheUidAndGroupsAndCannotGainMore) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to change credentials";
  TimedCommand command;
  command.argv = {"/bin/sh", "-c", "grep -E '^(Uid|Gid|Groups|NoNewPrivs):' /proc/self/status"};
  command.run_as = Credentials{65534, 65533, {65533, 4242}};
  const TimedRun run = run_timed_command(command);
  ASSERT_TRUE(run.ok()) << describe_timed_run(run, command.timeout) << " " << run.output;
  EXPECT_NE(run.output.find("Uid:\t65534\t65534\t65534\t65534"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("Gid:\t65533\t65533\t65533\t65533"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("Groups:\t4242 65533"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("NoNewPrivs:\t1"), std::string::npos) << run.output;
}

TEST_F(SpawnHostileTest, ADescriptorGpureapLeftInheritableIsClosedInTheProgram) {
  const int leaked = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC, as cpp-httplib's sockets
  ASSERT_GT(leaked, 2);
  TimedCommand command;
  const std::string n = std::to_string(leaked);
  command.argv = {"/bin/sh", "-c", "if [ -e /proc/self/fd/" + n + " ]; then echo open; else echo closed; fi"};
  const TimedRun run = run_timed_command(command);
  ::close(leaked);
  ASSERT_TRUE(run.ok()) << describe_timed_run(run, command.timeout);
  EXPECT_EQ(run.output, "closed\n");
}

TEST_F(SpawnHostileTest, ResourceLimitsGpureapSetForItselfAreNotInherited) {
  struct rlimit old_files {}, old_core {}, raised {};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old_files), 0);
  ASSERT_EQ(::getrlimit(RLIMIT_CORE, &old_core), 0);
  if (old_files.rlim_max <= 1024 || old_core.rlim_max == 0) GTEST_SKIP() << "no room to raise the limits here";
  raised = old_files;
  raised.rlim_cur = old_files.rlim_max;  // as kill's pinning does
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &raised), 0);
  raised = old_core;
  raised.rlim_cur = old_core.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_CORE, &raised), 0);
  TimedCommand command;
  command.argv = {"/bin/sh", "-c", "ulimit -n; ulimit -c"};
  const TimedRun run = run_timed_command(command);
  ::setrlimit(RLIMIT_NOFILE, &old_files);
  ::setrlimit(RLIMIT_CORE, &old_core);
  ASSERT_TRUE(run.ok()) << describe_timed_run(run, command.timeout);
  EXPECT_EQ(run.output, "1024\n0\n");
}

TEST_F(SpawnHostileTest, TheEnvironmentIsTheMinimalOneAndNothingOfGpureaps) {
  ::setenv("GPUREAP_TEST_SECRET", "from-the-caller", 1);
  TimedCommand command;
  command.argv = {"/usr/bin/env"};
  command.extra_env = {"CUDA_MPS_PIPE_DIRECTORY=/tmp/x", "LC_ALL=C.UTF-8"};
  const TimedRun run = run_timed_command(command);
  ::unsetenv("GPUREAP_TEST_SECRET");
  ASSERT_TRUE(run.ok()) << describe_timed_run(run, command.timeout);
  EXPECT_EQ(run.output,
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
            "CUDA_MPS_PIPE_DIRECTORY=/tmp/x\nLC_ALL=C.UTF-8\n");
}

TEST_F(SpawnHostileTest, ASetsidDaemonItStartedDoesNotOutliveIt) {
  const Bystander bystander;
  ASSERT_GT(bystander.pid, 0);
  TimedCommand command;
  // A double fork into a new session, as a daemon does, then the command exits 0.
  command.argv = {"/bin/sh", "-c",
                  "( setsid /bin/sh -c 'echo $$ > " + dir_ + "/daemon.pid; exec sleep 303' & ) ; "
                  "while [ ! -s " + dir_ + "/daemon.pid ]; do :; done; exit 0"};
  const TimedRun run = run_timed_command(command);
  EXPECT_TRUE(run.ok()) << describe_timed_run(run, command.timeout);
  EXPECT_FALSE(run.descendants_may_remain);
  const pid_t daemon = read_pid("daemon.pid");
  ASSERT_GT(daemon, 0);
  EXPECT_FALSE(alive(daemon)) << "the setsid'd sleep " << daemon << " outlived the command";
  EXPECT_TRUE(alive(bystander.pid)) << "a process that is not the command's was ended";
}

TEST_F(SpawnHostileTest, ACommandThatExitsAtOnceLeavesNoChildren) {
  const Bystander bystander;
  TimedCommand command;
  command.argv = {"/bin/sh", "-c", "sleep 301 & echo $! > " + dir_ + "/a.pid; sleep 302 & echo $! > " + dir_ +
                                       "/b.pid; exit 0"};
  const TimedRun run = run_timed_command(command);
  EXPECT_TRUE(run.ok()) << describe_timed_run(run, command.timeout);
  EXPECT_FALSE(run.descendants_may_remain);
  for (const char* name : {"a.pid", "b.pid"}) {
    const pid_t child = read_pid(name);
    ASSERT_GT(child, 0) << name;
    EXPECT_FALSE(alive(child)) << name << ": " << child << " outlived the command";
  }
  EXPECT_TRUE(alive(bystander.pid));
}

TEST_F(SpawnHostileTest, AtItsDeadlineASetsidDescendantEndsToo) {
  const Bystander bystander;
  TimedCommand command;
  command.argv = {"/bin/sh", "-c", "setsid sleep 303 & echo $! > " + dir_ + "/s.pid; exec sleep 300"};
  command.timeout = std::chrono::milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  const TimedRun run = run_timed_command(command);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(run.outcome, TimedOutcome::TimedOut);
  const pid_t sleeper = read_pid("s.pid");
  ASSERT_GT(sleeper, 0);
  EXPECT_FALSE(alive(sleeper)) << "the setsid'd sleep " << sleeper << " outlived the timeout";
  EXPECT_TRUE(alive(bystander.pid));
}

TEST_F(SpawnHostileTest, AFailureBeforeExecIsToldWithItsStageNotAsTheProgramsExit) {
  const int closed = 1000;  // no such descriptor: the dup2 onto stdin fails in the child
  ASSERT_LT(::fcntl(closed, F_GETFD), 0);
  StartRequest request;
  request.argv = {"true"};
  request.environment = {"PATH=/usr/bin:/bin"};
  request.stdin_fd = closed;
  const StartResult direct = start_process(request);
  EXPECT_EQ(direct.failed_at, StartStage::Descriptors);
  EXPECT_EQ(direct.error, EBADF);
  if (direct.pid > 0) ::waitpid(direct.pid, nullptr, 0);

  const KeptProgram kept = start_kept(request, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  ASSERT_EQ(kept.failed_at, StartStage::None);
  ASSERT_EQ(::waitpid(kept.keeper, nullptr, 0), kept.keeper);
  const KeptEnd end = read_keeper_report(kept.report.get());
  EXPECT_EQ(end.outcome, KeptOutcome::NotStarted);
  EXPECT_EQ(end.failed_at, StartStage::Descriptors);
  EXPECT_EQ(end.error, EBADF);
}

}  // namespace
}  // namespace gpureap
