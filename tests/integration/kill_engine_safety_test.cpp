// `gpureap kill` must never end a bystander through cgroup.kill, never leave a job stopped when
// it is itself interrupted, and never let a member escape because descriptors ran out. Real
// processes, the real binary.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "kill/cgroup_kill.hpp"
#include "cgroup_support.hpp"
#include "kill_support.hpp"
#include "signals_settled.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

// argv[1..] of a process, joined by spaces ("" when gone).
std::string args_of(pid_t pid) {
  std::string text = read_text_file("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& c : text) {
    if (c == '\0') c = ' ';
  }
  return text;
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::istringstream text(read_text_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
  for (pid_t child = 0; text >> child;) out.push_back(child);
  return out;
}

void end_group(pid_t leader) {
  kill(-leader, SIGKILL);
  int status = 0;
  eventually([&] { return waitpid(leader, &status, WNOHANG) != 0; }, 5000);
}

// Reaps our child `pid` once it has exited; false when it still runs after 5 s.
bool reaped(pid_t pid) {
  int status = 0;
  return eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 5000);
}

// `sh -c 'sleep 1000 & sleep 1001 & wait'` in its own cgroup; `gpureap kill
// <sleep 1000>` ends that sleep only. The shell and the sibling share its cgroup and process
// group, which never makes them part of the plan.
TEST(KillSafety, KillingOneSleepOfAShellJobInItsOwnCgroupLeavesTheShellAndItsSibling) {
  OwnCgroup cgroup("shelljob");
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  SimHost host;
  const pid_t shell = cgroup.start_shell("sleep 1000 & sleep 1001 & wait");
  ASSERT_GT(shell, 0);
  pid_t target = -1, sibling = -1;
  ASSERT_TRUE(eventually([&] {
    for (pid_t child : children_of(shell)) {
      const std::string args = args_of(child);
      // Before its exec a child is still "sh -c ...": only the exec'd sleeps count.
      if (args == "sleep 1000 ") target = child;
      if (args == "sleep 1001 ") sibling = child;
    }
    return target > 0 && sibling > 0;
  })) << "the shell did not start both sleeps";
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(target), "--yes", "--timeout", "1"}, &rc);
  const auto* t = kill_target(report, target);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["outcome"], "exited") << report.dump(2);
  EXPECT_TRUE((*t)["cgroup_killed"].is_null()) << "cgroup.kill was written: " << report.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(target); }));
  // Whatever gpureap sent the shell and the sibling has landed by now.
  ASSERT_TRUE(signals_settled(shell) && signals_settled(sibling));
  EXPECT_TRUE(running(shell)) << "the parent shell in the same cgroup and process group was ended";
  EXPECT_TRUE(running(sibling)) << "the sibling in the same cgroup and process group was ended" << report.dump(2);
  EXPECT_NE(process_state(shell), 'T');
  EXPECT_NE(process_state(sibling), 'T');
  end_group(shell);
}

// Once every member of the plan has exited, the cgroup may already hold the
// next job step or a restarted service: cgroup.kill is not written. The shell starts that
// "next step" (a new session) as it exits on SIGTERM.
TEST(KillSafety, CgroupKillIsNotWrittenOnceEveryMemberHasExited) {
  OwnCgroup cgroup("allexited");
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  SimHost host;
  const pid_t shell = cgroup.start_shell("trap 'setsid sleep 1002 & exit 0' TERM; sleep 1000 & wait");
  ASSERT_GT(shell, 0);
  ASSERT_TRUE(eventually([&] {
    const auto children = children_of(shell);
    return children.size() == 1 && args_of(children[0]) == "sleep 1000 ";
  }));
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(shell), "--yes", "--timeout", "2"}, &rc);
  const auto* t = kill_target(report, shell);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["outcome"], "exited") << report.dump(2);
  EXPECT_TRUE((*t)["cgroup_killed"].is_null()) << "cgroup.kill after every member exited: " << report.dump(2);
  EXPECT_TRUE(reaped(shell));
  // The next step shows up as `sleep 1002` once its exec is done, unless it was ended first;
  // what gpureap sent it has landed once it settles.
  std::vector<pid_t> next_step;
  eventually([&] {
    next_step.clear();
    for (pid_t pid : cgroup.pids()) {
      if (args_of(pid).find("sleep 1002") != std::string::npos && signals_settled(pid) && running(pid)) {
        next_step.push_back(pid);
      }
    }
    return !next_step.empty();
  });
  std::string seen;
  for (pid_t pid : cgroup.pids()) seen += std::to_string(pid) + " " + process_state(pid) + " " + args_of(pid) + "; ";
  EXPECT_EQ(next_step.size(), 1u) << "the process that appeared after the plan had exited was ended; in the cgroup: "
                                  << seen << report.dump(2);
  EXPECT_EQ(read_text_file(cgroup.path() + "/cgroup.freeze"), "0\n") << "gpureap left the cgroup frozen";
}

// Whether a process other than this one has `dir` open.
bool another_process_has_open(const std::string& dir) {
  std::error_code error;
  const auto wanted = std::filesystem::canonical(dir, error);
  if (error) return false;
  for (const auto& process : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = process.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos || name == std::to_string(getpid())) continue;
    std::error_code unreadable;
    for (const auto& fd : std::filesystem::directory_iterator(process.path() / "fd", unreadable)) {
      std::error_code gone;
      if (std::filesystem::read_symlink(fd.path(), gone) == wanted) return true;
    }
  }
  return false;
}

off_t size_of(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0 ? info.st_size : 0;
}

// Runs gpureap kill in the background with fdatasync slowed down by LD_PRELOAD, sends it
// `sig` `delay` after the ladder began (its first audit line appeared in `log`), and returns
// its wait status.
int kill_interrupted_after(const SimHost& host, const std::vector<std::string>& args, const std::string& log,
                           int sig, std::chrono::milliseconds delay, std::string& err) {
  const off_t log_size = size_of(log);
  const std::string err_path = host.state_dir() + "/gpureap.err";
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    for (const auto& [key, value] : host.env()) setenv(key.c_str(), value.c_str(), 1);
    setenv("LD_PRELOAD", SLOW_FDATASYNC_LIBRARY, 1);
    setenv("GPUREAP_TEST_FDATASYNC_MS", "30", 1);
    const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    const int error = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(error, STDERR_FILENO);
    std::vector<std::string> argv = {gpureap_binary(), "kill"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> c_argv;
    for (auto& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    execv(c_argv[0], c_argv.data());
    _exit(127);
  }
  eventually([&] { return size_of(log) > log_size; }, 10000);
  std::this_thread::sleep_for(delay);
  kill(pid, sig);
  int status = 0;
  const bool done = eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 20000);
  if (!done) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  err = read_text_file(err_path);
  return status;
}

// SIGINT, SIGHUP or SIGTERM delivered to gpureap at many points of the ladder
// over a tree of 8 (the audit log on a slow disk: 30 ms per fdatasync) never leaves a process
// stopped, and gpureap exits non-zero: 128 + the signal when it caught it.
void no_stopped_process_after_interruptions(int sig) {
  SimHost host;
  const std::string log = host.state_dir() + "/audit.log";
  int interrupted = 0;
  for (const int ms : {0, 5, 12, 20, 30, 45, 65, 90, 150, 2100}) {
    auto job = host.start({"--alloc", "0:1GiB", "--workers", "7", "--on-sigterm", "ignore",
                           "--workers-on-sigterm", "ignore"});
    ASSERT_EQ(job.workers.size(), 7u);
    std::vector<pid_t> tree = job.workers;
    tree.push_back(job.pid);
    std::string err;
    const int status = kill_interrupted_after(
        host, {std::to_string(job.pid), "--yes", "--timeout", "2", "--audit-log", log}, log, sig,
        std::chrono::milliseconds(ms), err);
    const bool exited_zero = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    EXPECT_FALSE(exited_zero) << "gpureap exited 0 although " << strsignal(sig) << " reached it after " << ms
                              << " ms\n" << err;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 128 + sig) ++interrupted;
    for (pid_t pid : tree) {
      EXPECT_NE(process_state(pid), 'T') << "PID " << pid << " left stopped after " << strsignal(sig) << " at "
                                         << ms << " ms; gpureap said:\n" << err;
    }
  }
  EXPECT_GE(interrupted, 8) << "the deliveries should land inside the ladder (exit 128+signal)";
}

TEST(KillSafety, SigintAtAnyPointOfTheLadderLeavesNothingStopped) { no_stopped_process_after_interruptions(SIGINT); }
TEST(KillSafety, SighupAtAnyPointOfTheLadderLeavesNothingStopped) { no_stopped_process_after_interruptions(SIGHUP); }
TEST(KillSafety, SigtermAtAnyPointOfTheLadderLeavesNothingStopped) { no_stopped_process_after_interruptions(SIGTERM); }

// A shell with `count` sleeps in its process group: the plan is the shell and every sleep.
// They ignore SIGHUP, so that only gpureap's signals can end them (not the kernel's SIGHUP to
// an orphaned process group).
pid_t start_sleepers(int count) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const std::string script = "trap '' HUP; i=0; while [ $i -lt " + std::to_string(count) + " ]; do sleep 1000 & i=$((i+1)); done; wait";
    execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

std::size_t count_running(const std::vector<pid_t>& pids) {
  std::size_t n = 0;
  for (pid_t pid : pids) n += running(pid) ? 1 : 0;
  return n;
}

// A shell with 100 sleeping children, killed whole by `gpureap kill` run under `ulimit_flag 48`
// (-Sn: the soft open-file limit only; -n: soft and hard).
struct LimitedKill {
  pid_t shell = 0;
  std::vector<pid_t> sleepers;
  CommandResult result;
};

std::optional<LimitedKill> kill_hundred_sleepers_with_file_limit(const SimHost& host, const std::string& ulimit_flag) {
  LimitedKill run;
  run.shell = start_sleepers(100);
  const bool started = eventually([&] {
    const auto children = children_of(run.shell);
    return children.size() == 100 && args_of(children.back()) == "sleep 1000 ";
  }, 20000);
  if (!started) {
    end_group(run.shell);
    return std::nullopt;
  }
  run.sleepers = children_of(run.shell);
  const std::string command = "ulimit " + ulimit_flag + " 48 && exec \"$0\" \"$@\"";
  std::vector<std::string> argv = {"/bin/sh", "-c", command, gpureap_binary(), "kill", std::to_string(run.shell), "--yes",
                                   "--timeout", "2", "--json"};
  SpawnOptions options;
  options.env = host.env();
  run.result = run_command(argv, options, 60000);
  return run;
}

// One pidfd per member. gpureap raises its soft RLIMIT_NOFILE to the hard
// limit, so a tree larger than the soft limit is ended whole.
TEST(KillSafety, TreeLargerThanTheSoftOpenFileLimitIsEndedWhole) {
  SimHost host;
  auto run = kill_hundred_sleepers_with_file_limit(host, "-Sn");
  ASSERT_TRUE(run) << "the shell did not start its 100 sleeps";
  const pid_t shell = run->shell;
  const std::vector<pid_t>& sleepers = run->sleepers;
  const CommandResult& result = run->result;
  EXPECT_EQ(result.exit_code, 0) << result.err << result.out;
  EXPECT_TRUE(reaped(shell)) << result.err << result.out;
  EXPECT_EQ(count_running(sleepers), 0u) << "processes of the tree escaped";
  end_group(shell);
}

// With the hard limit too low, the members that cannot be pinned are a reported failure
// (exit 6, each named), never a silent escape; and nothing is left stopped.
TEST(KillSafety, TreeLargerThanTheHardOpenFileLimitFailsLoudly) {
  SimHost host;
  auto run = kill_hundred_sleepers_with_file_limit(host, "-n");
  ASSERT_TRUE(run) << "the shell did not start its 100 sleeps";
  const pid_t shell = run->shell;
  const std::vector<pid_t>& sleepers = run->sleepers;
  const CommandResult& result = run->result;
  EXPECT_EQ(result.exit_code, 6) << result.err << result.out;
  const auto report = nlohmann::json::parse(result.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << result.out;
  std::size_t unpinned = 0;
  for (const auto& t : report["targets"]) {
    if (t["outcome"] == "survived" && t["detail"].is_string() &&
        t["detail"].get<std::string>().find("open-file limit") != std::string::npos) {
      ++unpinned;
      EXPECT_TRUE(running(t["pid"].get<pid_t>())) << "reported as not signalled, yet it is gone";
    }
  }
  EXPECT_GT(unpinned, 0u) << report.dump(2);
  for (pid_t pid : sleepers) {
    EXPECT_NE(process_state(pid), 'T') << pid;
    // Every survivor is named in the report.
    if (running(pid)) {
      EXPECT_NE(kill_target(report, pid), nullptr) << pid << " escaped without a word";
    }
  }
  end_group(shell);
}

}  // namespace
}  // namespace gpureap::test

namespace gpureap::test {
namespace {

// A cgroup frozen by someone else (an admin, a checkpointing tool) before
// `gpureap kill` is never thawed by it: the engine reads cgroup.freeze first and undoes only a
// freeze it made. The target still ends (a fatal signal reaches a frozen process).
TEST(KillSafety, AFreezeMadeBySomeoneElseSurvivesTheKill) {
  OwnCgroup cgroup("foreignfreeze");
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  SimHost host;
  const pid_t target = cgroup.start_shell("exec sleep 1000");
  ASSERT_GT(target, 0);
  ASSERT_TRUE(eventually([&] { return args_of(target) == "sleep 1000 "; }));
  {
    std::ofstream freeze(cgroup.path() + "/cgroup.freeze");
    freeze << "1";
  }
  ASSERT_TRUE(eventually([&] { return read_text_file(cgroup.path() + "/cgroup.events").find("frozen 1") != std::string::npos; }));
  int rc = -1;
  const auto report = kill_json(host, {std::to_string(target), "--yes", "--timeout", "0.5", "--no-verify"}, &rc);
  const auto* t = kill_target(report, target);
  ASSERT_NE(t, nullptr) << report.dump(2);
  // A fatal signal ends a frozen process: SIGTERM already does.
  EXPECT_TRUE((*t)["outcome"] == "exited" || (*t)["outcome"] == "killed") << report.dump(2);
  EXPECT_TRUE(reaped(target));
  EXPECT_EQ(read_text_file(cgroup.path() + "/cgroup.freeze").substr(0, 1), "1") << "gpureap thawed a freeze it did not make";
}

// Two gpureaps on one cgroup (watch and an epilog's reap) take turns on an flock of its
// directory. Here the test holds it: the kill waits, leaving the target running and neither
// frozen nor stopped by a fallback, and acts as soon as the lock is released.
TEST(KillSafety, AKillWaitsForTheCgroupLockAnotherHoldsAndActsOnceItIsReleased) {
  OwnCgroup cgroup("lockwait");
  if (!cgroup.skip_reason().empty()) GTEST_SKIP() << cgroup.skip_reason();
  SimHost host;
  const pid_t target = cgroup.start_shell("exec sleep 1000");
  ASSERT_GT(target, 0);
  ASSERT_TRUE(eventually([&] { return args_of(target) == "sleep 1000 "; }));
  int lock = ::open(cgroup.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);
  int rc = -1;
  nlohmann::json report;
  std::thread kill([&] { report = kill_json(host, {std::to_string(target), "--yes", "--timeout", "1", "--no-verify"}, &rc); });
  // gpureap holds the directory open while it waits for the lock (it tries every 10 ms): from
  // then on, and for many of its tries, the target runs, neither stopped nor frozen.
  EXPECT_TRUE(eventually([&] { return another_process_has_open(cgroup.path()); }, 10000)) << "the kill never reached the lock";
  const auto tries_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  std::string touched;
  do {
    if (!signals_settled(target) || !running(target)) {
      touched = "the kill did not wait for the lock";
    } else if (process_state(target) != 'S') {
      touched = "the target was stopped while another held the cgroup's lock";
    } else if (read_text_file(cgroup.path() + "/cgroup.events").find("frozen 0") == std::string::npos) {
      touched = "the cgroup was frozen while another held its lock";
    }
  } while (touched.empty() && std::chrono::steady_clock::now() < tries_end);
  EXPECT_EQ(touched, "");
  const auto released = std::chrono::steady_clock::now();
  ::close(lock);
  kill.join();
  const auto after_release = std::chrono::steady_clock::now() - released;
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(reaped(target));
  EXPECT_LT(after_release, std::chrono::milliseconds(1500)) << "the kill did not act once the lock was free";
  EXPECT_NE(read_text_file(cgroup.path() + "/cgroup.events").find("frozen 0"), std::string::npos);
}

}  // namespace
}  // namespace gpureap::test
