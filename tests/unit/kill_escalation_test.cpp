// The escalation ladder against real processes: what was sent, in which order, how each
// process ended, and that nothing is left alive.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <grp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kill/cgroup_kill.hpp"
#include "kill/escalation.hpp"
#include "kill_test_support.hpp"

namespace gpureap {
namespace {

using namespace killtest;
using Strings = std::vector<std::string>;

EscalationOptions fast(int timeout_ms, int grace_ms = 1000) {
  EscalationOptions options;
  options.timeout = std::chrono::milliseconds(timeout_ms);
  options.kill_grace = std::chrono::milliseconds(grace_ms);
  return options;
}

std::vector<EscalationTarget> one_target(pid_t pid, bool tree = false) {
  std::vector<EscalationTarget> targets(1);
  targets[0].ref = pin_or_die(pid);
  targets[0].sweep_descendants = tree;
  targets[0].reason = "test";
  return targets;
}

pid_t pauser() {
  return spawn([](int fd) {
    ready(fd);
    pause_forever();
  });
}

pid_t term_ignorer() {
  return spawn([](int fd) {
    ::signal(SIGTERM, SIG_IGN);
    ready(fd);
    pause_forever();
  });
}

TEST(Escalation, ProcessThatExitsOnSigtermEndsWithOneSignal) {
  const pid_t pid = pauser();
  ASSERT_GT(pid, 0);
  const auto results = run_escalation(one_target(pid), fast(5000));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].pid, pid);
  EXPECT_EQ(results[0].outcome, KillOutcome::ExitedAfterSignal) << results[0].detail;
  EXPECT_EQ(results[0].signals, (Strings{"SIGTERM"}));
  ASSERT_TRUE(results[0].exit_ms.has_value());
  EXPECT_LT(*results[0].exit_ms, 1000.0);
  EXPECT_FALSE(results[0].discovered);
  const int status = reap(pid, false);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
}

TEST(Escalation, IgnoredSigtermIsFollowedBySigkillAtTheTimeout) {
  const pid_t pid = term_ignorer();
  ASSERT_GT(pid, 0);
  const auto results = run_escalation(one_target(pid), fast(200));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].outcome, KillOutcome::Killed) << results[0].detail;
  EXPECT_EQ(results[0].signals, (Strings{"SIGTERM", "SIGKILL"}));
  ASSERT_TRUE(results[0].exit_ms.has_value());
  // From the SIGKILL that ended it, not from the SIGTERM it ignored 200 ms earlier.
  EXPECT_LT(*results[0].exit_ms, 180.0);
  const int status = reap(pid, false);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

TEST(Escalation, SlowExitWithinTheTimeoutIsNotKilled) {
  const pid_t pid = spawn([](int fd) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    ready(fd);
    int sig = 0;
    sigwait(&set, &sig);
    ::usleep(150000);  // cleaning up
    ::_exit(7);
  });
  ASSERT_GT(pid, 0);
  const auto results = run_escalation(one_target(pid), fast(3000));
  EXPECT_EQ(results[0].outcome, KillOutcome::ExitedAfterSignal);
  EXPECT_EQ(results[0].signals, (Strings{"SIGTERM"}));
  ASSERT_TRUE(results[0].exit_ms.has_value());
  EXPECT_GE(*results[0].exit_ms, 140.0);
  const int status = reap(pid, false);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7);
}

TEST(Escalation, WithoutEscalationASurvivorStaysAliveAndIsReported) {
  const pid_t pid = term_ignorer();
  ASSERT_GT(pid, 0);
  EscalationOptions options = fast(100);
  options.escalate = false;
  const auto results = run_escalation(one_target(pid), options);
  EXPECT_EQ(results[0].outcome, KillOutcome::Survived);
  EXPECT_EQ(results[0].signals, (Strings{"SIGTERM"}));
  EXPECT_FALSE(results[0].exit_ms.has_value());
  EXPECT_NE(results[0].detail.find("SIGKILL not sent"), std::string::npos) << results[0].detail;
  EXPECT_TRUE(alive(pid));
  reap(pid);
}

TEST(Escalation, CustomFirstSignal) {
  const pid_t pid = term_ignorer();
  ASSERT_GT(pid, 0);
  EscalationOptions options = fast(2000);
  options.first_signal = SIGINT;
  const auto results = run_escalation(one_target(pid), options);
  EXPECT_EQ(results[0].outcome, KillOutcome::ExitedAfterSignal);
  EXPECT_EQ(results[0].signals, (Strings{"SIGINT"}));
  const int status = reap(pid, false);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT);
}

TEST(Escalation, StoppedProcessGetsSigcontAfterTheFirstSignalAndHandlesIt) {
  const pid_t pid = spawn([](int fd) {
    ::signal(SIGTERM, [](int) { ::_exit(3); });
    ready(fd);
    pause_forever();
  });
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGSTOP);
  ASSERT_TRUE(wait_for_state(pid, 'T'));
  const auto results = run_escalation(one_target(pid), fast(3000));
  EXPECT_EQ(results[0].outcome, KillOutcome::ExitedAfterSignal) << results[0].detail;
  EXPECT_EQ(results[0].signals, (Strings{"SIGTERM", "SIGCONT"}));
  const int status = reap(pid, false);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << "the handler ran after SIGCONT";
}

TEST(Escalation, ZombieIsReportedWithItsParentAndNotSignalled) {
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  const pid_t pid = spawn([&](int fd) {
    ::close(gate[1]);
    ready(fd);
    char byte;
    (void)!::read(gate[0], &byte, 1);
    ::_exit(0);
  });
  ASSERT_GT(pid, 0);
  ::close(gate[0]);
  auto targets = one_target(pid);  // pinned while alive
  ::close(gate[1]);
  ASSERT_TRUE(wait_for_state(pid, 'Z'));
  int audited = 0;
  const auto results = run_escalation(std::move(targets), fast(100), [&](const SignalEvent&) { ++audited; });
  EXPECT_EQ(results[0].outcome, KillOutcome::Zombie);
  EXPECT_TRUE(results[0].signals.empty());
  EXPECT_EQ(audited, 0);
  EXPECT_EQ(results[0].final_state, 'Z');
  const auto self = procfs::read_stat("/proc", ::getpid());
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(results[0].detail, "zombie: exited, holds no GPU memory; its parent " + std::to_string(::getpid()) +
                                   " (" + self->comm + ") has not reaped it");
  reap(pid, false);
}

TEST(Escalation, ProcessThatExitedBeforeTheSignalIsAlreadyGone) {
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  const pid_t pid = spawn([&](int fd) {
    ::close(gate[1]);
    ready(fd);
    char byte;
    (void)!::read(gate[0], &byte, 1);
    ::_exit(0);
  });
  ASSERT_GT(pid, 0);
  ::close(gate[0]);
  auto targets = one_target(pid);
  ::close(gate[1]);
  reap(pid, false);
  const auto results = run_escalation(std::move(targets), fast(100));
  EXPECT_EQ(results[0].outcome, KillOutcome::AlreadyGone);
  EXPECT_TRUE(results[0].signals.empty());
}

TEST(Escalation, NeverSignalsPidOneItselfOrAnUnpinnedTarget) {
  std::vector<EscalationTarget> targets(3);
  targets[0].ref = pin_or_die(1);
  targets[1].ref = pin_or_die(::getpid());
  int audited = 0;
  const auto results = run_escalation(std::move(targets), fast(50), [&](const SignalEvent&) { ++audited; });
  ASSERT_EQ(results.size(), 3u);
  for (const auto& result : results) {
    EXPECT_EQ(result.outcome, KillOutcome::Refused) << result.pid;
    EXPECT_TRUE(result.signals.empty());
  }
  EXPECT_EQ(audited, 0);
}

TEST(Escalation, EverySignalIsAuditedBeforeItIsSent) {
  const pid_t pid = term_ignorer();
  ASSERT_GT(pid, 0);
  std::vector<SignalEvent> before;
  std::vector<SignalEvent> after;
  auto targets = one_target(pid);
  targets[0].reason = "holds GPU 0";
  const auto results = run_escalation(
      std::move(targets), fast(100),
      [&](const SignalEvent& event) {
        before.push_back(event);
        EXPECT_TRUE(alive(pid)) << "audited before sending";
      },
      [&](const SignalEvent& event) { after.push_back(event); });
  ASSERT_EQ(before.size(), 2u);
  EXPECT_EQ(before[0].signal, SIGTERM);
  EXPECT_EQ(before[1].signal, SIGKILL);
  EXPECT_EQ(before[0].pid, pid);
  EXPECT_EQ(before[0].start_time_ticks, start_ticks(pid));
  EXPECT_EQ(before[0].reason, "holds GPU 0");
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].result_errno, 0);
  EXPECT_EQ(after[1].result_errno, 0);
  EXPECT_EQ(results[0].outcome, KillOutcome::Killed);
  reap(pid, false);
}

TEST(Escalation, FailingAuditSinkStopsTheSignal) {
  const pid_t pid = pauser();
  ASSERT_GT(pid, 0);
  EXPECT_THROW(run_escalation(one_target(pid), fast(100),
                              [](const SignalEvent&) { throw std::runtime_error("disk full"); }),
               std::runtime_error);
  ASSERT_TRUE(test::signals_settled(pid));
  EXPECT_TRUE(alive(pid));
  EXPECT_NE(state_of(pid), 'T');
  reap(pid);
}

TEST(Escalation, FailingAuditSinkMidFreezeLeavesNothingStopped) {
  // The tree root gets its SIGSTOP audited; the audit of the child's SIGSTOP fails.
  const pid_t pid = spawn([](int fd) {
    if (::fork() == 0) pause_forever();
    ready(fd);
    pause_forever();
  });
  ASSERT_GT(pid, 0);
  int calls = 0;
  EXPECT_THROW(run_escalation(one_target(pid, true), fast(100),
                              [&](const SignalEvent& event) {
                                if (++calls == 2 && event.signal == SIGSTOP) throw std::runtime_error("disk full");
                              }),
               std::runtime_error);
  ASSERT_TRUE(test::signals_settled(pid));
  EXPECT_TRUE(alive(pid));
  EXPECT_NE(state_of(pid), 'T') << "the root was resumed";
  ::kill(-pid, SIGKILL);
  reap(pid);
}

// Reaps every process of group pgid that was reparented to us (we are a subreaper).
void reap_group(pid_t pgid) {
  ::kill(-pgid, SIGKILL);  // test cleanup only: whatever survived a failed test
  int status = 0;
  while (::waitpid(-pgid, &status, 0) > 0 || errno == EINTR) {
  }
}

std::vector<pid_t> live_members_of_group(pid_t pgid) {
  std::vector<pid_t> out;
  for (const auto& stat : procfs::scan_stats("/proc")) {
    if (stat.pgid == pgid && stat.state != 'Z' && stat.state != 'X') out.push_back(stat.pid);
  }
  return out;
}

class EscalationTree : public ::testing::Test {
 protected:
  void SetUp() override { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
  void TearDown() override { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
};

TEST_F(EscalationTree, TreeThatKeepsForkingDuringTheKillEndsWithNoneLeft) {
  // The root forks a child every 2 ms; each child forks a grandchild and waits; all of them
  // ignore SIGTERM, so only the SIGKILL of every member ends them.
  const pid_t root = spawn([](int fd) {
    ::signal(SIGTERM, SIG_IGN);
    ready(fd);
    for (int i = 0; i < 400; ++i) {
      if (::fork() == 0) {
        if (::fork() == 0) pause_forever();
        pause_forever();
      }
      ::usleep(2000);
    }
    pause_forever();
  });
  ASSERT_GT(root, 0);
  ::usleep(20000);  // let it grow
  const auto results = run_escalation(one_target(root, true), fast(300, 2000));
  std::size_t discovered = 0;
  for (const auto& result : results) {
    EXPECT_TRUE(result.outcome == KillOutcome::Killed || result.outcome == KillOutcome::ExitedAfterSignal)
        << result.pid << ": " << kill_outcome_name(result.outcome) << " " << result.detail;
    if (result.discovered) ++discovered;
  }
  EXPECT_GE(discovered, 4u);
  ASSERT_FALSE(results.empty());
  EXPECT_EQ(results[0].pid, root);
  EXPECT_EQ(results[0].signals, (Strings{"SIGSTOP", "SIGTERM", "SIGCONT", "SIGSTOP", "SIGKILL"}));
  EXPECT_TRUE(live_members_of_group(root).empty());
  reap_group(root);
}

TEST_F(EscalationTree, TreeOfProcessesThatExitOnSigtermIsFrozenThenEnded) {
  const pid_t root = spawn([](int fd) {
    for (int i = 0; i < 3; ++i) {
      if (::fork() == 0) {
        if (::fork() == 0) pause_forever();
        pause_forever();
      }
    }
    ::usleep(20000);
    ready(fd);
    pause_forever();
  });
  ASSERT_GT(root, 0);
  const auto results = run_escalation(one_target(root, true), fast(3000));
  ASSERT_EQ(results.size(), 7u);  // root, 3 children, 3 grandchildren
  for (const auto& result : results) {
    EXPECT_EQ(result.outcome, KillOutcome::ExitedAfterSignal) << result.pid << " " << result.detail;
    EXPECT_EQ(result.signals, (Strings{"SIGSTOP", "SIGTERM", "SIGCONT"})) << result.pid;
    EXPECT_EQ(result.discovered, result.pid != root);
  }
  EXPECT_TRUE(live_members_of_group(root).empty());
  reap_group(root);
}

TEST_F(EscalationTree, ProcessGroupOfAFourRankJobWithWorkers) {
  // A launcher whose 4 ranks each have a worker; all share the launcher's process group.
  const pid_t launcher = spawn([](int fd) {
    int up[2];
    if (::pipe(up) != 0) ::_exit(1);
    for (int rank = 0; rank < 4; ++rank) {
      if (::fork() == 0) {
        if (::fork() == 0) {
          (void)!::write(up[1], "w", 1);
          pause_forever();
        }
        (void)!::write(up[1], "r", 1);
        pause_forever();
      }
    }
    char byte;
    for (int i = 0; i < 8; ++i) (void)!::read(up[0], &byte, 1);
    ready(fd);
    pause_forever();
  });
  ASSERT_GT(launcher, 0);
  auto targets = one_target(launcher);
  targets[0].process_group = launcher;
  const auto results = run_escalation(std::move(targets), fast(3000));
  EXPECT_EQ(results.size(), 9u);
  for (const auto& result : results) {
    EXPECT_EQ(result.outcome, KillOutcome::ExitedAfterSignal) << result.pid << " " << result.detail;
  }
  EXPECT_TRUE(live_members_of_group(launcher).empty());
  reap_group(launcher);
}

TEST(Escalation, NonRootAskingToKillRootsProcessIsDeniedAndNothingIsSignalled) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the test switches a child to uid 65534 (nobody)";
  const pid_t victim = pauser();
  ASSERT_GT(victim, 0);
  const std::uint64_t start = start_ticks(victim);
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t asker = ::fork();
  ASSERT_GE(asker, 0);
  if (asker == 0) {
    ::close(out[0]);
    std::string text;
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) {
      text = "setup failed";
    } else {
      std::vector<EscalationTarget> targets(1);
      PinResult pinned = PidRef::pin(victim, start);
      targets[0].ref = std::move(pinned.ref);
      const auto results = run_escalation(std::move(targets), fast(100));
      text = kill_outcome_name(results.at(0).outcome) + "\n" + std::to_string(results[0].signals.size()) + "\n" +
             results[0].detail;
    }
    (void)!::write(out[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(out[1]);
  std::string text;
  char buffer[512];
  for (ssize_t got; (got = ::read(out[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(got));
  ::close(out[0]);
  reap(asker, false);
  EXPECT_EQ(text, "permission-denied\n0\nowned by root (uid 0): run as root");
  EXPECT_TRUE(alive(victim));
  EXPECT_NE(state_of(victim), 'T');
  reap(victim);
}

// A real D state: the cgroup v1 freezer parks tasks in __refrigerator, uninterruptibly; a
// SIGKILL stays pending until the group is thawed.
TEST(Escalation, ProcessInUninterruptibleSleepIsReportedWithItsWchan) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a cgroup v1 freezer group";
  const std::string freezer = "/sys/fs/cgroup/freezer";
  struct stat info{};
  if (::stat((freezer + "/cgroup.procs").c_str(), &info) != 0) {
    GTEST_SKIP() << "no cgroup v1 freezer mounted at " << freezer
                 << " (cgroup v2 only: its freezer stops tasks in an interruptible sleep, not D)";
  }
  const std::string group = freezer + "/gpureap-test-" + std::to_string(::getpid());
  if (::mkdir(group.c_str(), 0755) != 0 && errno != EEXIST) {
    GTEST_SKIP() << "cannot create " << group << ": " << std::strerror(errno);
  }
  const pid_t pid = pauser();
  ASSERT_GT(pid, 0);
  auto write_file = [](const std::string& path, const std::string& text) {
    std::ofstream file(path);
    file << text;
    file.flush();
    return static_cast<bool>(file);
  };
  ASSERT_TRUE(write_file(group + "/cgroup.procs", std::to_string(pid)));
  ASSERT_TRUE(write_file(group + "/freezer.state", "FROZEN"));
  ASSERT_TRUE(wait_for_state(pid, 'D'));

  const auto results = run_escalation(one_target(pid), fast(100, 200));
  EXPECT_EQ(results[0].outcome, KillOutcome::StuckInD);
  EXPECT_EQ(results[0].signals, (Strings{"SIGTERM", "SIGKILL"}));
  EXPECT_EQ(results[0].final_state, 'D');
  EXPECT_FALSE(results[0].wchan.empty());
  EXPECT_EQ(results[0].detail, "uninterruptible sleep in " + results[0].wchan +
                                   ": SIGKILL takes effect only when this kernel call returns (often NFS or a hung "
                                   "device)");

  write_file(group + "/freezer.state", "THAWED");
  const int status = reap(pid, false);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the pending SIGKILL ends it once thawed";
  ::rmdir(group.c_str());
}

}  // namespace
}  // namespace gpureap

namespace gpureap::killtest {
namespace {

std::string cgroup2_mount_point() {
  return gpureap::cgroupfs::cgroup2_mount("/proc").value_or(std::string());
}

// A tree whose middle processes exit right after forking: their children are reparented out
// of the tree, beyond any sweep. When the tree is its own cgroup v2, cgroup.kill must take
// them too, and only them. They are the plan's only because the job's process group was
// selected (--group): sharing the group alone never lets cgroup.kill take a process (issue
// 8, item 3), so without the group they would not be members of the plan.
TEST(EscalationCgroup, TreeInItsOwnCgroupIsKilledWholeIncludingReparentedChildren) {
  if (::geteuid() != 0) GTEST_SKIP() << "creating a cgroup needs root";
  const std::string mount = cgroup2_mount_point();
  if (mount.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy mounted";
  const std::string dir = mount + "/gpureap-test-cgkill-" + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0755) != 0) GTEST_SKIP() << "cannot create " << dir << ": " << std::strerror(errno);
  if (::access((dir + "/cgroup.kill").c_str(), W_OK) != 0) {
    ::rmdir(dir.c_str());
    GTEST_SKIP() << "this kernel has no cgroup.kill (needs 5.14)";
  }
  const std::string procs = dir + "/cgroup.procs";
  const pid_t root = spawn([&procs](int fd) {
    const int cg = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (cg < 0 || ::write(cg, "0", 1) != 1) ::_exit(3);  // "0": move the writer itself
    ::close(cg);
    ::signal(SIGTERM, SIG_IGN);
    ready(fd);
    for (int i = 0; i < 300; ++i) {
      if (::fork() == 0) {
        if (::fork() == 0) pause_forever();  // reparented as soon as its parent exits
        ::_exit(0);
      }
      ::usleep(3000);
    }
    pause_forever();
  });
  ASSERT_GT(root, 0);
  ::usleep(20000);
  auto targets = one_target(root, true);
  targets[0].process_group = root;  // spawn made it the leader of its group
  const auto results = run_escalation(std::move(targets), fast(200, 2000));
  ASSERT_FALSE(results.empty());
  EXPECT_EQ(results[0].cgroup_killed, dir);
  // Every process of the cgroup is gone, escaped grandchildren included.
  bool empty = false;
  for (int i = 0; i < 200 && !empty; ++i) {
    empty = gpureap::cgroupfs::cgroup_subtree_pids(dir).empty();
    if (!empty) ::usleep(10000);
  }
  EXPECT_TRUE(empty) << "processes left in " << dir;
  if (!empty) gpureap::cgroupfs::write_cgroup_kill(dir);  // clean up after a failure
  reap(root);
  for (int i = 0; i < 100 && ::rmdir(dir.c_str()) != 0; ++i) ::usleep(10000);
}

// A cgroup shared with an unrelated process (another process group) is never cgroup.killed.
TEST(EscalationCgroup, CgroupSharedWithAnOutsiderIsNotKilledWhole) {
  if (::geteuid() != 0) GTEST_SKIP() << "creating a cgroup needs root";
  const std::string mount = cgroup2_mount_point();
  if (mount.empty()) GTEST_SKIP() << "no cgroup v2 hierarchy mounted";
  const std::string dir = mount + "/gpureap-test-cgshared-" + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0755) != 0) GTEST_SKIP() << "cannot create " << dir;
  const std::string procs = dir + "/cgroup.procs";
  auto join = [&procs](int fd) {
    const int cg = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
    if (cg < 0 || ::write(cg, "0", 1) != 1) ::_exit(3);
    ::close(cg);
    ready(fd);
    pause_forever();
  };
  const pid_t outsider = spawn(join);  // its own process group (spawn calls setpgid)
  const pid_t target = spawn(join);
  ASSERT_GT(outsider, 0);
  ASSERT_GT(target, 0);
  const auto results = run_escalation(one_target(target, true), fast(500, 1000));
  ASSERT_FALSE(results.empty());
  EXPECT_TRUE(results[0].cgroup_killed.empty());
  EXPECT_EQ(results[0].outcome, KillOutcome::ExitedAfterSignal);
  EXPECT_TRUE(alive(outsider)) << "the outsider in the same cgroup must survive";
  reap(target);
  reap(outsider);
  for (int i = 0; i < 100 && ::rmdir(dir.c_str()) != 0; ++i) ::usleep(10000);
}

}  // namespace
}  // namespace gpureap::killtest
