// `gpureap run`: a simulated 4-rank job with 2 workers per rank (real processes holding
// simulated GPU memory), and the ways a job ends: normally, with leftovers, a crashed rank with
// and without --fail-fast, forwarded signals, escapees, a rank ignoring SIGTERM, PID 1 of a
// PID namespace, a hang. Bystanders beside the job survive every one of them.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "cgroup_support.hpp"
#include "run_support.hpp"

namespace gpureap::test {
namespace {

constexpr int kRanks = 4;

// Lines "<pid> <signal>" the signal recorder wrote.
std::map<int, std::set<pid_t>> recorded_signals(const std::string& file) {
  std::map<int, std::set<pid_t>> out;
  std::ifstream in(file);
  for (pid_t pid; in >> pid;) {
    int sig = 0;
    in >> sig;
    out[sig].insert(pid);
  }
  return out;
}

void expect_not_listed(const SimHost& host, const std::vector<pid_t>& pids) {
  const auto ps = host.ps_json();
  for (pid_t pid : pids) EXPECT_EQ(find_process(ps, pid), nullptr) << "PID " << pid << " still on a GPU";
}

TEST(RunJob, NormalExitKeepsTheStatusAndLeavesNothing) {
  SimHost host;
  // Ranks that end cleanly, as a PyTorch rank does: its DataLoader ends and joins its workers
  // before the rank exits. Without the join, workers that only die of their parent's exit can
  // still be running when the main command ends, and are then truly left behind.
  BackgroundRun run(host, {"--poll-interval", "100ms"},
                    rank_launcher(kRanks,
                                  "--workers 2 --worker-mode die-with-parent --workers-at-exit join --exit-after 1500",
                                  7));
  std::vector<pid_t> all;
  for (int i = 0; i < kRanks; ++i) {
    const auto pids = run.sim_ready();
    ASSERT_EQ(pids.size(), 3u);
    all.insert(all.end(), pids.begin(), pids.end());
  }
  EXPECT_EQ(run.wait(), 7);
  const auto report = run.report();
  EXPECT_EQ(report["end"], "exited");
  EXPECT_EQ(report["main_status"]["exit_code"], 7);
  EXPECT_TRUE(report["left_and_ended"].empty()) << report.dump(2);
  expect_memory_verified(report);
  EXPECT_EQ(report["gpus"].size(), 2u);
  for (pid_t pid : all) EXPECT_FALSE(running(pid)) << pid;
  expect_not_listed(host, all);
}

TEST(RunJob, WorkersLeftWhenTheMainCommandExitsAreEndedAndTheMemoryVerified) {
  SimHost host;
  // Ranks exit and leave their (surviving) workers holding the contexts: the DataLoader case.
  const std::string audit = host.state_dir() + "/audit.log";
  BackgroundRun run(host, {"--poll-interval", "100ms", "--kill-timeout", "2", "--audit-log", audit},
                    rank_launcher(kRanks, "--workers 2 --exit-after 800"));
  std::vector<pid_t> workers;
  for (int i = 0; i < kRanks; ++i) {
    const auto pids = run.sim_ready();
    ASSERT_EQ(pids.size(), 3u);
    workers.insert(workers.end(), pids.begin() + 1, pids.end());
  }
  EXPECT_EQ(run.wait(), 0);
  const auto report = run.report();
  for (pid_t w : workers) {
    const auto* e = ended_entry(report, w);
    ASSERT_NE(e, nullptr) << "worker " << w << " not ended: " << report.dump(2);
    EXPECT_EQ((*e)["outcome"], "exited");
    EXPECT_FALSE(running(w));
  }
  expect_memory_verified(report);
  EXPECT_TRUE(report["cgroup_removed"].get<bool>());
  // Every signal of the end is in the audit log, announced before it was sent.
  std::map<pid_t, std::set<std::string>> stages;
  std::ifstream log(audit);
  for (std::string line; std::getline(log, line);) {
    const auto entry = nlohmann::json::parse(line);
    stages[entry["pid"].get<pid_t>()].insert(entry["stage"].get<std::string>());
  }
  for (pid_t w : workers) EXPECT_EQ(stages[w], (std::set<std::string>{"sending", "sent"})) << w;
}

TEST(RunJob, FailFastEndsEveryRankAndWorkerWhenOneRankIsKilled) {
  if (!running_as_root()) GTEST_SKIP() << "a rank's death is seen through the kernel's exit events, which need root";
  SimHost host;
  // A bystander beside the job: same user, same GPU, not a descendant of gpureap run.
  SimProcess bystander = host.start({"--alloc", "0:512MiB"});
  BackgroundRun run(host, {"--fail-fast", "--poll-interval", "100ms", "--kill-timeout", "2"},
                    rank_launcher(kRanks, "--workers 2"));
  std::vector<std::vector<pid_t>> ranks;
  for (int i = 0; i < kRanks; ++i) ranks.push_back(run.sim_ready());
  // The job is looked at (its GPU users known) before the crash.
  ASSERT_TRUE(eventually([&] { return find_process(host.ps_json(), ranks[3][0]) != nullptr; }));
  poll(nullptr, 0, 300);
  ASSERT_EQ(kill(ranks[0][0], SIGKILL), 0);
  EXPECT_EQ(run.wait(), 128 + SIGKILL);
  const auto report = run.report();
  EXPECT_EQ(report["end"], "fail-fast");
  EXPECT_EQ(report["failed_process"]["pid"], ranks[0][0]);
  EXPECT_EQ(report["failed_process"]["signal"], "SIGKILL");
  for (const auto& rank : ranks) {
    for (pid_t pid : rank) EXPECT_FALSE(running(pid)) << pid;
  }
  expect_memory_verified(report);
  EXPECT_TRUE(running(bystander.pid)) << "the bystander beside the job was ended";
  EXPECT_NE(find_process(host.ps_json(), bystander.pid), nullptr);
}

TEST(RunJob, WithoutFailFastTheJobKeepsRunningAfterARankDies) {
  SimHost host;
  BackgroundRun run(host, {"--poll-interval", "100ms", "--kill-timeout", "2"}, rank_launcher(kRanks, "--workers 2"));
  std::vector<std::vector<pid_t>> ranks;
  for (int i = 0; i < kRanks; ++i) ranks.push_back(run.sim_ready());
  ASSERT_EQ(kill(ranks[0][0], SIGKILL), 0);
  // Several looks at the job go by: nothing may end it.
  poll(nullptr, 0, 1000);
  for (int i = 1; i < kRanks; ++i) {
    for (pid_t pid : ranks[i]) EXPECT_TRUE(running(pid)) << pid;
  }
  // SIGTERM to gpureap run reaches the job; the launcher's shell dies of it.
  kill(run.pid(), SIGTERM);
  EXPECT_EQ(run.wait(), 128 + SIGTERM);
  for (const auto& rank : ranks) {
    for (pid_t pid : rank) EXPECT_FALSE(running(pid)) << pid;
  }
  expect_memory_verified(run.report());
}

// A stop between two looks (here: the first look past, the next a minute away, and no
// holder events) still has the GPU the job holds verified: gpureap run looks at the job just
// before it forwards the stop.
TEST(RunJob, AStopBetweenLooksStillVerifiesTheGpuTheJobHeld) {
  SimHost host;
  // The rank starts once the first look has loaded the driver into gpureap run, its parent.
  BackgroundRun run(host, {"--poll-interval", "60s", "--kill-timeout", "2"},
                    {"/bin/sh", "-c",
                     "while ! grep -q libnvidia-ml /proc/$PPID/maps; do sleep 0.02; done; \"$SIM\" --alloc 0:1GiB & wait"},
                    false, {"/usr/bin/env", "GPUREAP_HOLDER_EVENTS=off"});
  const std::vector<pid_t> rank = run.sim_ready();
  ASSERT_EQ(rank.size(), 1u);
  kill(run.pid(), SIGTERM);
  EXPECT_EQ(run.wait(), 128 + SIGTERM);
  EXPECT_FALSE(running(rank[0]));
  const auto report = run.report();
  EXPECT_FALSE(report["holder_events"].get<bool>()) << report.dump(2);
  expect_memory_verified(report);
}

TEST(RunJob, EachForwardedSignalReachesEveryRankButNotAStrangerInTheGroup) {
  SimHost host;
  const std::string file = host.state_dir() + "/signals";
  BackgroundRun run(host, {"--kill-timeout", "500ms"},
                    {SIGNAL_RECORDER_BINARY, file, std::to_string(kRanks), std::to_string(SIGUSR2)}, true);
  const auto ready = run.line_starting("READY ");
  ASSERT_EQ(ready.size(), 1u + kRanks);
  std::set<pid_t> job;
  for (const auto& w : ready) {
    job.insert(std::stoi(w));
    run.remember(std::stoi(w));
  }
  const pid_t group = std::stoi(ready[0]);  // the main process leads the job's group
  // A stranger of the same session joins the job's process group: it must hear nothing.
  const pid_t stranger = fork();
  if (stranger == 0) {
    setpgid(0, group);
    for (;;) pause();
  }
  ASSERT_TRUE(eventually([&] { return getpgid(stranger) == group; }));
  // What tini forwards: SIGTSTP, SIGCONT and SIGWINCH too (sent to a gpureap without a terminal,
  // SIGTSTP is forwarded and does not stop it).
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGWINCH, SIGTSTP, SIGCONT, SIGUSR2}) {
    ASSERT_EQ(kill(run.pid(), sig), 0);
    EXPECT_TRUE(eventually([&] { return recorded_signals(file)[sig].size() >= job.size(); }))
        << "signal " << sig << " reached " << recorded_signals(file)[sig].size() << " of " << job.size();
    EXPECT_EQ(recorded_signals(file)[sig], job) << "signal " << sig;
  }
  EXPECT_EQ(run.wait(), 0);  // the main process exits 0 on SIGUSR2; the ranks are ended
  for (pid_t pid : job) EXPECT_FALSE(running(pid)) << pid;
  EXPECT_TRUE(running(stranger)) << "a stranger in the job's process group was ended";
  kill(stranger, SIGKILL);
  waitpid(stranger, nullptr, 0);
}

class RunEscapees : public ::testing::TestWithParam<bool> {};

TEST_P(RunEscapees, DoubleForkedAndSetsidProcessesAreStillEnded) {
  const bool cgroup = GetParam();
  SimHost host;
  // A bystander started by the test: never ended.
  SimProcess bystander = host.start({"--alloc", "1:256MiB"});
  std::vector<std::string> args = {"--kill-timeout", "1"};
  if (!cgroup) args.push_back("--no-cgroup");
  BackgroundRun run(host, args,
                    {"/bin/sh", "-c",
                     "/bin/sh -c '\"$SIM\" --alloc 0:1GiB & exit 0'; "        // double fork: reparented to gpureap
                     "setsid \"$SIM\" --alloc 1:1GiB & "                     // a new session
                     "sleep 0.5; exit 0"});
  const auto first = run.sim_ready();
  const auto second = run.sim_ready();
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(run.wait(), 0);
  const auto report = run.report();
  EXPECT_EQ(report["ownership"], cgroup ? "cgroup" : "subreaper-tree");
  for (pid_t pid : {first[0], second[0]}) {
    const auto* e = ended_entry(report, pid);
    ASSERT_NE(e, nullptr) << pid << ": " << report.dump(2);
    EXPECT_FALSE(running(pid)) << pid;
    // The job's own cgroup is frozen whole (cgroup.freeze), even with several trees in it:
    // no member is stopped one by one.
    if (cgroup) {
      EXPECT_FALSE(has_signal(*e, "SIGSTOP")) << e->dump();
    }
  }
  expect_memory_verified(report);
  EXPECT_TRUE(running(bystander.pid));
}

INSTANTIATE_TEST_SUITE_P(CgroupAndTree, RunEscapees, ::testing::Values(true, false),
                         [](const auto& cgroup) { return cgroup.param ? "Cgroup" : "NoCgroup"; });

// Under a low open-file limit the members are pinned in batches: pinning all 120 at once had
// left the ladder no descriptor to read /proc with, and every member read as "already gone"
// while all of them ran on (exit 0). A bystander outside the job survives.
TEST(RunJob, ManyLeftoversUnderALowOpenFileLimitAreAllEnded) {
  if (access("/usr/bin/prlimit", X_OK) != 0) GTEST_SKIP() << "needs prlimit(1) from util-linux";
  SimHost host;
  const pid_t bystander = fork();
  if (bystander == 0) {
    for (;;) pause();
  }
  // Ended however the test ends: a failed assertion returns early.
  const std::shared_ptr<void> end_bystander(nullptr, [bystander](void*) {
    kill(bystander, SIGKILL);
    waitpid(bystander, nullptr, 0);
  });
  BackgroundRun run(host, {"--kill-timeout", "2", "--no-cgroup"},
                    {"/bin/sh", "-c", "i=0; while [ $i -lt 120 ]; do sleep 300 & i=$((i+1)); done; exit 0"}, false,
                    {"/usr/bin/prlimit", "--nofile=40:40", "--"});
  EXPECT_EQ(run.wait(), 0);
  const auto report = run.report();
  ASSERT_EQ(report["left_and_ended"].size(), 120u) << report.dump(2);
  for (const auto& e : report["left_and_ended"]) {
    EXPECT_EQ(e["outcome"], "exited") << e.dump();
    EXPECT_FALSE(running(e["pid"].get<pid_t>())) << e.dump();
  }
  EXPECT_TRUE(running(bystander));
}

TEST(RunJob, ARankIgnoringSigtermIsKilledAfterTheKillTimeout) {
  SimHost host;
  BackgroundRun run(host, {"--kill-timeout", "1", "--poll-interval", "100ms"},
                    {"/bin/sh", "-c", "\"$SIM\" --alloc 0:1GiB --on-sigterm ignore & sleep 0.6; exit 0"});
  const auto pids = run.sim_ready();
  ASSERT_FALSE(pids.empty());
  EXPECT_EQ(run.wait(), 0);
  const auto report = run.report();
  const auto* e = ended_entry(report, pids[0]);
  ASSERT_NE(e, nullptr) << report.dump(2);
  EXPECT_EQ((*e)["outcome"], "killed");
  EXPECT_TRUE(has_signal(*e, "SIGTERM"));
  EXPECT_TRUE(has_signal(*e, "SIGKILL"));
  // Described before it was killed.
  ASSERT_FALSE(report["evidence"].empty());
  EXPECT_EQ(report["evidence"][0]["pid"], pids[0]);
  expect_memory_verified(report);
  EXPECT_FALSE(running(pids[0]));
}

TEST(RunJob, SignalsWhileTheJobIsBeingEndedNeitherStopTheEndNorLoseTheReport) {
  SimHost host;
  BackgroundRun run(host, {"--kill-timeout", "2"},
                    {"/bin/sh", "-c", "\"$SIM\" --alloc 0:1GiB --on-sigterm ignore & sleep 0.3; exit 0"});
  const auto pids = run.sim_ready();
  ASSERT_FALSE(pids.empty());
  // At 0.8 s the main command (0.3 s) has exited and the rank, ignoring SIGTERM, has 2 s left
  // of --kill-timeout: gpureap is inside the ladder.
  poll(nullptr, 0, 800);
  ASSERT_TRUE(running(pids[0]));
  for (int i = 0; i < 3; ++i) kill(run.pid(), SIGTERM);
  kill(run.pid(), SIGINT);
  EXPECT_EQ(run.wait(), 0);
  const auto report = run.report();
  const auto* e = ended_entry(report, pids[0]);
  ASSERT_NE(e, nullptr) << report.dump(2);
  EXPECT_EQ((*e)["outcome"], "killed");
  EXPECT_FALSE(running(pids[0]));
  EXPECT_FALSE(report["forwarded_signals"].empty());
}

TEST(RunJob, AProcessThatCannotBeEndedIsDescribedAndTheStatusSaysSo) {
  SimHost host;
  BackgroundRun run(host, {"--kill-timeout", "500ms", "--verify-timeout", "1", "--poll-interval", "100ms"},
                    {"/bin/sh", "-c", "\"$SIM\" --alloc 0:1GiB & exec sleep 1000"});
  const auto pids = run.sim_ready();
  ASSERT_FALSE(pids.empty());
  FrozenInD frozen(pids[0]);
  if (!frozen.why_not.empty()) {
    kill(run.pid(), SIGTERM);
    run.wait();
    GTEST_SKIP() << frozen.why_not;
  }
  ASSERT_TRUE(eventually([&] { return process_state(pids[0]) == 'D'; }));
  // Frozen while idle (the simulator's rank holds no lock of its state then). SIGTERM to gpureap
  // reaches the job's group: the main command (sleep) ends, the frozen rank cannot act on it.
  kill(run.pid(), SIGTERM);
  EXPECT_EQ(run.wait(), 123) << "part of the job is still there: a distinct status";
  // A person is told which process and why.
  EXPECT_NE(run.stderr_text().find("PID " + std::to_string(pids[0]) + ": stuck-in-d"), std::string::npos)
      << run.stderr_text();
  const auto report = run.report();
  const auto* e = ended_entry(report, pids[0]);
  ASSERT_NE(e, nullptr) << report.dump(2);
  EXPECT_EQ((*e)["outcome"], "stuck-in-d");
  EXPECT_EQ((*e)["state"], "D");
  bool described = false;
  for (const auto& ev : report["evidence"]) described = described || (ev["pid"] == pids[0] && ev["state"] == "D");
  EXPECT_TRUE(described) << report["evidence"].dump(2);
  ASSERT_FALSE(report["gpus"].empty()) << report.dump(2);
  EXPECT_FALSE(report["gpus"][0]["verified_free"].get<bool>());
  EXPECT_FALSE(report["cgroup_removed"].get<bool>()) << "a cgroup still holding the process stays";
}

TEST(RunJob, AsPid1OfAPidNamespaceItReapsOrphansAndForwardsSignals) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare --pid";
  SimHost host;
  const std::string file = host.state_dir() + "/signals";
  // The orphans: a shell whose background sleeps outlive it and end as zombies of PID 1.
  const std::string script = "/bin/sh -c 'sleep 0.2 & sleep 0.3 & exit 0'; exec \"$RECORDER\" " + file + " 2 " +
                             std::to_string(SIGTERM);
  BackgroundRun run(host, {"--kill-timeout", "500ms", "--no-cgroup"}, {"/bin/sh", "-c", script}, false,
                    {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc"});
  const auto ready = run.line_starting("READY ");
  ASSERT_EQ(ready.size(), 3u);
  EXPECT_EQ(ready[0], "2") << "the job's main process is PID 2 beside gpureap as PID 1";
  // gpureap run is unshare's child; signals go to it from outside the namespace.
  pid_t guard = -1;
  ASSERT_TRUE(eventually([&] {
    std::ifstream children("/proc/" + std::to_string(run.pid()) + "/task/" + std::to_string(run.pid()) + "/children");
    return static_cast<bool>(children >> guard);
  }));
  poll(nullptr, 0, 500);  // the orphans end meanwhile
  ASSERT_EQ(kill(guard, SIGUSR1), 0);
  EXPECT_TRUE(eventually([&] { return recorded_signals(file)[SIGUSR1].size() == 3; }));
  ASSERT_EQ(kill(guard, SIGTERM), 0);  // the main process exits on it; the ranks are ended
  EXPECT_EQ(run.wait(), 0);
  const auto report = run.report();
  EXPECT_GE(report["orphans_reaped"].get<int>(), 2) << report.dump(2);
  EXPECT_EQ(report["left_and_ended"].size(), 2u) << report.dump(2);
}

TEST(RunJob, HangTimeoutEndsAnIdleJobAndLeavesABusyOneAlone) {
  SimHost host;
  {
    BackgroundRun idle(host, {"--hang-timeout", "1", "--poll-interval", "100ms", "--kill-timeout", "1"},
                       {"/bin/sh", "-c", "exec \"$SIM\" --alloc 0:1GiB"});
    const auto pids = idle.sim_ready();
    EXPECT_EQ(idle.wait(), 124);
    const auto report = idle.report();
    EXPECT_EQ(report["end"], "hung");
    EXPECT_GE(report["idle_s"].get<double>(), 1.0);
    ASSERT_FALSE(report["evidence"].empty()) << report.dump(2);
    EXPECT_EQ(report["evidence"][0]["pid"], pids[0]);
    expect_memory_verified(report);
  }
  {
    // Busy on the GPU (per-process SM utilisation from the driver), idle on the CPU: not hung.
    BackgroundRun busy(host, {"--hang-timeout", "1", "--poll-interval", "100ms"},
                       {"/bin/sh", "-c", "exec \"$SIM\" --alloc 0:1GiB --sm-util 40 --exit-after 2500"});
    busy.sim_ready();
    EXPECT_EQ(busy.wait(), 0);
    EXPECT_EQ(busy.report()["end"], "exited");
  }
}

TEST(RunJob, DumpOnHangSavesABacktraceBesideTheReportOrSaysWhyNot) {
  SimHost host;
  BackgroundRun run(host,
                    {"--hang-timeout", "1", "--dump-on-hang", "--poll-interval", "100ms", "--kill-timeout", "1"},
                    {"/bin/sh", "-c", "exec \"$SIM\" --alloc 0:1GiB"});
  const auto pids = run.sim_ready();
  ASSERT_FALSE(pids.empty());
  EXPECT_EQ(run.wait(60000), 124);
  const auto report = run.report();
  ASSERT_FALSE(report["evidence"].empty()) << report.dump(2);
  const auto& evidence = report["evidence"][0];
  EXPECT_EQ(evidence["pid"], pids[0]);
  const bool have_gdb = std::filesystem::exists("/usr/bin/gdb");
  if (have_gdb) {
    // gdb's backtrace of the simulated (native) process, in a private directory beside the report.
    EXPECT_EQ(report["evidence_dir"], run.report_path() + ".evidence");
    ASSERT_EQ(evidence["dump_files"].size(), 1u) << evidence.dump(2);
    const std::string file = evidence["dump_files"][0];
    EXPECT_EQ(file, run.report_path() + ".evidence/" + std::to_string(pids[0]) + ".gdb.txt");
    std::ifstream in(file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("#0"), std::string::npos) << text.substr(0, 2000);
    struct stat dir {};
    ASSERT_EQ(stat(report["evidence_dir"].get<std::string>().c_str(), &dir), 0);
    EXPECT_EQ(dir.st_mode & 0777, 0700u);
  } else {
    bool said = false;
    for (const auto& note : evidence["notes"]) said = said || note.get<std::string>().find("gdb is not installed") != std::string::npos;
    EXPECT_TRUE(said) << evidence.dump(2);
  }
}

// On a terminal the job gets the foreground: it reads what is typed (a background group would
// be stopped by SIGTTIN and hang), and gpureap takes the terminal back afterwards.
TEST(RunJob, OnATerminalTheJobIsInTheForegroundAndReadsInput) {
  if (access("/usr/bin/script", X_OK) != 0) GTEST_SKIP() << "needs script(1) from util-linux for a pseudo-terminal";
  SimHost host;
  SpawnOptions options;
  options.env = host.env();
  const std::string job = "'" + gpureap_binary() + "' run -- /bin/sh -c 'read line; echo got:$line; exit 4'";
  const auto result = run_command(
      {"/bin/sh", "-c", "printf 'typed\\n' | /usr/bin/script -qec \"$0\" /dev/null; echo script-exit:$?", job}, options,
      20000);
  EXPECT_NE(result.out.find("got:typed"), std::string::npos) << result.out << result.err;
  EXPECT_NE(result.out.find("script-exit:4"), std::string::npos) << result.out << result.err;
}

TEST(RunJob, BadOptionsStartNothing) {
  SimHost host;
  const std::string marker = host.state_dir() + "/started";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--kill-timeout", "nan", "--", "/usr/bin/touch", marker},
        std::vector<std::string>{"run", "--hang-timeout", "0.1", "--", "/usr/bin/touch", marker},
        std::vector<std::string>{"run", "--poll-interval", "1e300", "--", "/usr/bin/touch", marker},
        std::vector<std::string>{"run", "--report", "/nonexistent/dir/report.json", "--", "/usr/bin/touch", marker},
        std::vector<std::string>{"run"}}) {
    const auto result = host.gpureap(args);
    EXPECT_EQ(result.exit_code, 125) << args[1] << ": " << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_FALSE(std::filesystem::exists(marker)) << args[1];
  }
  EXPECT_EQ(host.gpureap({"run", "--", "/nonexistent/program"}).exit_code, 127);
}

}  // namespace
}  // namespace gpureap::test
