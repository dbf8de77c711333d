// The ladder's steps against real processes: one audit flush per step, an interruption that
// leaves nothing stopped or frozen, a tree that owns its cgroup frozen with cgroup.freeze.
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kill/cgroup_kill.hpp"
#include "kill/escalation.hpp"
#include "kill/interrupt_guard.hpp"
#include "kill_test_support.hpp"

namespace gpureap::killtest {
namespace {

using Strings = std::vector<std::string>;

EscalationOptions quick(int timeout_ms) {
  EscalationOptions options;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  options.kill_grace = std::chrono::milliseconds(1000);
  return options;
}

std::vector<EscalationTarget> tree_target(pid_t pid) {
  std::vector<EscalationTarget> targets(1);
  targets[0].ref = pin_or_die(pid);
  targets[0].sweep_descendants = true;
  targets[0].reason = "test";
  return targets;
}

// A root with `children` children, all ignoring SIGTERM unless `exit_on_term`.
pid_t tree_of(int children, bool exit_on_term, const std::string& cgroup_procs = "") {
  return spawn([=](int fd) {
    if (!cgroup_procs.empty()) {
      const int cg = ::open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
      if (cg < 0 || ::write(cg, "0", 1) != 1) ::_exit(3);
      ::close(cg);
    }
    if (!exit_on_term) ::signal(SIGTERM, SIG_IGN);
    for (int i = 0; i < children; ++i) {
      if (::fork() == 0) pause_forever();
    }
    ::usleep(20000);
    ready(fd);
    pause_forever();
  });
}

class LadderSteps : public ::testing::Test {
 protected:
  void SetUp() override { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
  void TearDown() override { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
  static void end_tree(pid_t root) {
    ::kill(-root, SIGKILL);
    ::kill(-root, SIGCONT);
    int status = 0;
    while (::waitpid(-root, &status, 0) > 0 || errno == EINTR) {
    }
  }
};

// The audit log is flushed once per step, not once per signal.
TEST_F(LadderSteps, AuditIsFlushedOncePerStepNotPerSignal) {
  const pid_t root = tree_of(7, true);
  ASSERT_GT(root, 0);
  std::size_t before = 0, flushes = 0, unflushed = 0, sent_unflushed = 0;
  AuditHooks hooks;
  hooks.before = [&](const SignalEvent&) {
    ++before;
    ++unflushed;
  };
  hooks.flush = [&]() {
    ++flushes;
    unflushed = 0;
  };
  hooks.after = [&](const SignalEvent&) { sent_unflushed += unflushed; };  // sent before its line was on disk?
  const auto run = run_ladder(tree_target(root), quick(3000), hooks);
  ASSERT_EQ(run.results.size(), 8u);
  for (const auto& result : run.results) {
    EXPECT_EQ(result.outcome, KillOutcome::ExitedAfterSignal) << result.pid;
    EXPECT_EQ(result.signals, (Strings{"SIGSTOP", "SIGTERM", "SIGCONT"})) << result.pid;
  }
  EXPECT_EQ(before, 24u);  // 8 x (SIGSTOP, SIGTERM, SIGCONT)
  EXPECT_EQ(sent_unflushed, 0u) << "a signal went out before its audit line was flushed";
  EXPECT_LE(flushes, 6u) << "one flush per step (freeze, a sweep or two, first signal, SIGCONT, the end)";
  EXPECT_EQ(run.interrupted_by, 0);
  end_tree(root);
}

// A SIGINT that reaches gpureap while the tree is stopped continues every
// member it stopped, sends nothing more, and says it was interrupted.
TEST_F(LadderSteps, InterruptionDuringTheFreezeContinuesEveryStoppedMember) {
  const pid_t root = tree_of(7, false);
  ASSERT_GT(root, 0);
  AuditHooks hooks;
  bool raised = false;
  hooks.before = [&](const SignalEvent& event) {
    if (event.signal == SIGSTOP && !raised) {
      raised = true;
      ::raise(SIGINT);  // the user's Ctrl-C, in the middle of the freeze
    }
  };
  InterruptGuard guard;  // the caller's, as kill's main thread installs it
  auto options = quick(5000);
  options.interruption = guard.interruption();
  const auto run = run_ladder(tree_target(root), options, hooks);
  EXPECT_EQ(run.interrupted_by, SIGINT);
  ASSERT_FALSE(run.results.empty());
  EXPECT_EQ(run.results[0].signals, (Strings{"SIGSTOP", "SIGCONT"}));
  for (const auto& result : run.results) {
    EXPECT_EQ(result.outcome, KillOutcome::Survived) << result.pid;
    EXPECT_NE(result.detail.find("interrupted by SIGINT"), std::string::npos) << result.detail;
    for (const auto& sig : result.signals) EXPECT_NE(sig, "SIGTERM") << "signalled after the interruption";
  }
  for (const auto& stat : procfs::scan_stats("/proc")) {
    if (stat.pgid == root) {
      ASSERT_TRUE(test::signals_settled(stat.pid)) << stat.pid;
      EXPECT_NE(state_of(stat.pid), 'T') << stat.pid << " left stopped";
    }
  }
  EXPECT_TRUE(alive(root));
  end_tree(root);
}

// A cgroup v2 directory of the test's own, removed at the end.
struct TestCgroup {
  std::string path;
  std::string skip;
  explicit TestCgroup(const std::string& name) {
    const auto mount = cgroupfs::cgroup2_mount("/proc");
    if (::geteuid() != 0) {
      skip = "creating a cgroup needs root";
      return;
    }
    if (!mount) {
      skip = "no cgroup v2 hierarchy mounted";
      return;
    }
    path = *mount + "/gpureap-unit-" + name + "-" + std::to_string(::getpid());
    if (::mkdir(path.c_str(), 0755) != 0) {
      skip = "cannot create " + path + ": " + std::strerror(errno);
      path.clear();
    } else if (::access((path + "/cgroup.kill").c_str(), W_OK) != 0 ||
               ::access((path + "/cgroup.freeze").c_str(), W_OK) != 0) {
      skip = "this kernel has no cgroup.kill or cgroup.freeze (needs 5.14)";
    }
  }
  ~TestCgroup() {
    if (path.empty()) return;
    cgroupfs::write_cgroup_kill(path);
    for (int i = 0; i < 200 && ::rmdir(path.c_str()) != 0; ++i) ::usleep(10000);
  }
  std::string freeze_state() const {
    std::ifstream file(path + "/cgroup.freeze");
    std::string text;
    std::getline(file, text);
    return text;
  }
};

// A tree that owns its cgroup is frozen with cgroup.freeze (no SIGSTOP), ended with
// cgroup.kill, and the cgroup is thawed afterwards.
TEST_F(LadderSteps, TreeThatOwnsItsCgroupIsFrozenWithCgroupFreezeAndThawedAfter) {
  TestCgroup cgroup("owns");
  if (!cgroup.skip.empty()) GTEST_SKIP() << cgroup.skip;
  const pid_t root = tree_of(3, false, cgroup.path + "/cgroup.procs");
  ASSERT_GT(root, 0);
  const auto run = run_ladder(tree_target(root), quick(200), AuditHooks{});
  ASSERT_EQ(run.results.size(), 4u);
  EXPECT_EQ(run.results[0].cgroup_killed, cgroup.path);
  for (const auto& result : run.results) {
    EXPECT_EQ(result.outcome, KillOutcome::Killed) << result.pid << " " << result.detail;
    EXPECT_EQ(result.signals, (Strings{"SIGTERM", "SIGKILL"})) << result.pid << ": frozen by cgroup.freeze, not SIGSTOP";
  }
  EXPECT_EQ(cgroup.freeze_state(), "0") << "the cgroup was left frozen";
  end_tree(root);
}

// Interrupted while its cgroup is frozen: thawed, and nothing more is sent.
TEST_F(LadderSteps, InterruptionWhileTheCgroupIsFrozenThawsIt) {
  TestCgroup cgroup("interrupt");
  if (!cgroup.skip.empty()) GTEST_SKIP() << cgroup.skip;
  const pid_t root = tree_of(3, false, cgroup.path + "/cgroup.procs");
  ASSERT_GT(root, 0);
  AuditHooks hooks;
  std::string frozen_when_raised;
  hooks.before = [&](const SignalEvent& event) {
    if (event.signal == SIGTERM && frozen_when_raised.empty()) {
      frozen_when_raised = cgroup.freeze_state();
      ::raise(SIGHUP);  // the terminal closed while the tree is frozen
    }
  };
  InterruptGuard guard;
  auto options = quick(5000);
  options.interruption = guard.interruption();
  const auto run = run_ladder(tree_target(root), options, hooks);
  EXPECT_EQ(frozen_when_raised, "1");
  EXPECT_EQ(run.interrupted_by, SIGHUP);
  EXPECT_EQ(cgroup.freeze_state(), "0") << "the cgroup was left frozen";
  EXPECT_TRUE(run.results[0].cgroup_killed.empty());
  for (const auto& result : run.results) {
    for (const auto& sig : result.signals) EXPECT_NE(sig, "SIGKILL");
  }
  ASSERT_TRUE(test::signals_settled(root));
  EXPECT_TRUE(alive(root));
  EXPECT_NE(state_of(root), 'T');
  end_tree(root);
}

}  // namespace
}  // namespace gpureap::killtest

namespace gpureap::killtest {
namespace {

// The systemd PidRef pattern: a /proc read that feeds a report is kept
// only while the pidfd still names an unreaped process with our start time. A stat read from
// a PID that was reaped meanwhile (here: a copy of its stat, as a reused PID would show the
// same path) is discarded.
TEST(PidRefReads, ReadIsDiscardedOnceThePinnedProcessWasReaped) {
  const pid_t pid = spawn([](int fd) {
    ready(fd);
    pause_forever();
  });
  ASSERT_GT(pid, 0);
  PidRef ref = pin_or_die(pid);
  ASSERT_TRUE(ref.valid());
  char root_template[] = "/tmp/gpureap-pidref-XXXXXX";
  ASSERT_NE(::mkdtemp(root_template), nullptr);
  const std::string root = root_template;
  const std::string dir = root + "/" + std::to_string(pid);
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  {
    std::ifstream real("/proc/" + std::to_string(pid) + "/stat");
    std::ofstream copy(dir + "/stat");
    copy << real.rdbuf();
  }
  EXPECT_TRUE(ref.read_stat(root).has_value()) << "alive: the read stands";
  reap(pid);
  EXPECT_FALSE(ref.read_stat(root).has_value()) << "reaped: the read may describe someone else";
  ::unlink((dir + "/stat").c_str());
  ::rmdir(dir.c_str());
  ::rmdir(root.c_str());
}

}  // namespace
}  // namespace gpureap::killtest

namespace gpureap::killtest {
namespace {

// nohup, or a background job of a script, starts gpureap with SIGHUP (SIGINT) ignored: that
// signal was never going to stop it, so it does not interrupt the ladder either.
TEST(LadderInterrupts, SignalIgnoredBeforeTheLadderDoesNotInterruptIt) {
  const pid_t pid = spawn([](int fd) {
    ready(fd);
    pause_forever();
  });
  ASSERT_GT(pid, 0);
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGHUP, &ignore, &previous);
  std::vector<EscalationTarget> targets(1);
  targets[0].ref = pin_or_die(pid);
  targets[0].reason = "test";
  AuditHooks hooks;
  hooks.before = [](const SignalEvent&) { ::raise(SIGHUP); };
  EscalationOptions options;
  options.timeout = std::chrono::milliseconds(3000);
  const auto run = run_ladder(std::move(targets), options, hooks);
  ::sigaction(SIGHUP, &previous, nullptr);
  EXPECT_EQ(run.interrupted_by, 0);
  ASSERT_EQ(run.results.size(), 1u);
  EXPECT_EQ(run.results[0].outcome, KillOutcome::ExitedAfterSignal) << run.results[0].detail;
  reap(pid, false);
}

}  // namespace
}  // namespace gpureap::killtest
