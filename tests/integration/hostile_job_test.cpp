// `gpureap run` and `gpureap reap` against what a hostile local user or a careless script can
// do: a FIFO planted where gpureap (root) writes its report, audit log or dumps; an empty value
// from an unset variable; signals sent to gpureap run while it ends the job.
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "run_support.hpp"

namespace gpureap::test {
namespace {

void expect_one_line(const CommandResult& r, int status, const std::string& words) {
  EXPECT_EQ(r.exit_code, status) << r.err;
  EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(HostileJob, AFifoAtTheReportOrAuditLogPathIsOneLineAndNeverAHang) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string fifo = host.state_dir() + "/planted-fifo";
  const std::string marker = host.state_dir() + "/started";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0666), 0);
  const auto started = std::chrono::steady_clock::now();
  expect_one_line(host.gpureap({"run", "--report", fifo, "--", "/usr/bin/touch", marker}), 125, "not a regular file");
  expect_one_line(host.gpureap({"run", "--audit-log", fifo, "--", "/usr/bin/touch", marker}), 125,
                  "not a regular file");
  expect_one_line(host.gpureap({"reap", "--uid", std::to_string(getuid()), "--audit-log", fifo}), 2,
                  "not a regular file");
  expect_one_line(host.gpureap({"run", "--report", "/dev/full", "--", "/usr/bin/touch", marker}), 125,
                  "not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_TRUE(running(job.pid));
}

// As root in /tmp, a path someone else prepared must not be written through: a hard link to a
// file of ours (it could be /etc/passwd) or a file another user owns (it would receive the
// report, readable by them) is refused, and neither changes.
TEST(HostileJob, AHardLinkOrAnotherUsersFileIsNeverWrittenAsReportOrAuditLog) {
  if (!running_as_root()) GTEST_SKIP() << "needs root to own a file as another user";
  const passwd* other = test_user();
  ASSERT_NE(other, nullptr);
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string precious = host.state_dir() + "/precious";
  const std::string link = host.state_dir() + "/innocent-name.json";
  std::ofstream(precious) << "keep me\n";
  ASSERT_EQ(::link(precious.c_str(), link.c_str()), 0);
  const std::string theirs = host.state_dir() + "/theirs.json";
  std::ofstream(theirs) << "their data\n";
  ASSERT_EQ(chown(theirs.c_str(), other->pw_uid, other->pw_gid), 0);
  const std::string marker = host.state_dir() + "/started";
  for (const std::string& path : {link, theirs}) {
    const std::string why = path == link ? "hard links" : "belongs to uid";
    expect_one_line(host.gpureap({"run", "--report", path, "--", "/usr/bin/touch", marker}), 125, why);
    expect_one_line(host.gpureap({"run", "--audit-log", path, "--", "/usr/bin/touch", marker}), 125, why);
    expect_one_line(host.gpureap({"kill", std::to_string(job.pid), "--audit-log", path, "--yes"}), 2, why);
    expect_one_line(host.gpureap({"reap", "--uid", std::to_string(getuid()), "--audit-log", path}), 2, why);
  }
  std::ifstream kept(precious);
  std::string text((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "keep me\n");
  std::ifstream theirs_in(theirs);
  std::string their_text((std::istreambuf_iterator<char>(theirs_in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(their_text, "their data\n");
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_TRUE(running(job.pid));
}

// Dumps go only to a directory of gpureap's own user that nobody else may write to: in one
// another user made (--report /tmp/x.json puts them in /tmp/x.json.evidence), a FIFO at a
// dump's name hung gpureap for ever, blocked signals and all, with the job left running.
TEST(HostileJob, DumpsAreNotWrittenIntoADirectoryOthersMayWriteTo) {
  SimHost host;
  const std::string dir = host.state_dir() + "/shared-evidence";
  ASSERT_EQ(mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  const pid_t next = [] {
    std::ifstream in("/proc/sys/kernel/ns_last_pid");
    pid_t last = 0;
    in >> last;
    return last;
  }();
  for (pid_t pid = next; pid < next + 2000; ++pid) {
    mkfifo((dir + "/" + std::to_string(pid) + ".gdb.txt").c_str(), 0666);
  }
  BackgroundRun run(host, {"--kill-timeout", "500ms", "--poll-interval", "100ms", "--dump-on-hang", "--evidence-dir", dir},
                    {"/bin/sh", "-c", "\"$SIM\" --alloc 0:1GiB --on-sigterm ignore & sleep 0.5; exit 0"});
  const auto pids = run.sim_ready();
  ASSERT_FALSE(pids.empty());
  EXPECT_EQ(run.wait(20000), 0) << run.stderr_text();
  EXPECT_FALSE(running(pids[0]));
  const auto report = run.report();
  EXPECT_NE(report["notes"].dump().find("others may write to it"), std::string::npos) << report.dump(2);
}

TEST(HostileJob, AnEmptyValueIsAUsageErrorNotAWiderSelection) {
  SimHost host;
  auto on0 = host.start({"--alloc", "0:1GiB"});
  auto on1 = host.start({"--alloc", "1:1GiB"});
  const std::string me = std::to_string(getuid());
  // `--gpus "$SLURM_JOB_GPUS"` with the variable unset took the user's processes on every GPU.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"reap", "--uid", me, "--gpus", ""},
        std::vector<std::string>{"reap", "--uid", me, "--cgroup", ""},
        std::vector<std::string>{"reap", "--user", "", "--gpus", "0"},
        std::vector<std::string>{"reap", "--uid", me, "--gpus", "0", "--baseline-mib", ""}}) {
    expect_one_line(host.gpureap(args), 2, "empty value");
  }
  // `--user="$UNSET" PID`: the '=' form must not take the next word as the value.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"kill", "--user=", me, "--yes"},
        std::vector<std::string>{"kill", "--name=", std::to_string(on0.pid), "--yes"},
        std::vector<std::string>{"reap", "--user=", me}}) {
    expect_one_line(host.gpureap(args), 2, "empty value");
  }
  EXPECT_TRUE(running(on0.pid) && running(on1.pid)) << "an empty value signalled";
  const std::string marker = host.state_dir() + "/started";
  for (const char* option : {"--hang-timeout", "--report", "--evidence-dir"}) {
    expect_one_line(host.gpureap({"run", option, "", "--", "/usr/bin/touch", marker}), 125, "empty value");
    expect_one_line(host.gpureap({"run", std::string(option) + "=", "--", "/usr/bin/touch", marker}), 125,
                    "empty value");
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
}

// SIGTERM and SIGINT to gpureap run while it ends what the job left (Ctrl-C pressed again): the
// job is still ended whole, and gpureap reports and exits with the job's status instead of
// dying of the pending signal with an empty --report.
TEST(HostileJob, SignalsWhileTheJobIsEndedLeaveTheReportAndTheJobsStatus) {
  SimHost host;
  const std::string audit = host.state_dir() + "/audit.log";
  BackgroundRun run(host, {"--kill-timeout", "2", "--poll-interval", "100ms", "--audit-log", audit},
                    {"/bin/sh", "-c", "\"$SIM\" --alloc 0:1GiB --on-sigterm ignore & sleep 0.3; exit 3"});
  const auto pids = run.sim_ready();
  ASSERT_FALSE(pids.empty());
  // The main command has exited and the ending has begun: the leftover was sent its SIGTERM
  // (which it ignores, so SIGKILL is 2 s away).
  ASSERT_TRUE(eventually([&] { return audited(audit_lines(audit), pids[0], "SIGTERM"); }, 15000))
      << run.stderr_text();
  kill(run.pid(), SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(run.pid(), SIGINT);
  EXPECT_EQ(run.wait(), 3) << run.stderr_text();
  const auto report = run.report();
  EXPECT_EQ(report["end"], "exited");
  EXPECT_FALSE(running(pids[0]));
  const auto* e = ended_entry(report, pids[0]);
  ASSERT_NE(e, nullptr) << report.dump(2);
  EXPECT_EQ((*e)["outcome"], "killed");
  EXPECT_TRUE((*e)["detail"].is_null()) << "killed, yet the detail says SIGKILL was not sent: " << e->dump();
}

// The Slurm scripts refuse a hostile SLURM_* value, and say so on one line of slurmd's log: a
// newline in it must not forge a second line, nor an escape sequence reach a terminal raw.
TEST(HostileJob, SlurmScriptsQuoteAHostileValueInTheirOneLine) {
  SimHost host;
  const std::string deploy = std::string(GPUREAP_DEPLOY_DIR) + "/slurm/";
  const std::string hostile = "1\n\x1b]0;pwned\x07";
  const std::vector<std::pair<std::string, std::map<std::string, std::string>>> cases = {
      {"epilog.sh", {{"SLURM_JOB_ID", hostile}, {"SLURM_JOB_UID", "0"}}},
      {"epilog.sh", {{"SLURM_JOB_ID", "5"}, {"SLURM_JOB_UID", "0"}, {"SLURM_JOB_GPUS", hostile}}},
      {"prolog.sh", {{"SLURM_JOB_ID", hostile}, {"SLURM_JOB_GPUS", hostile}}},
  };
  for (const auto& [script, env] : cases) {
    SpawnOptions options;
    options.env = env;
    options.env["GPUREAP"] = gpureap_binary();
    const auto r = run_command({"/bin/bash", deploy + script}, options);
    EXPECT_EQ(r.exit_code, 2) << script << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << script << ": " << r.err;
    EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << script << ": " << r.err;
  }
}

}  // namespace
}  // namespace gpureap::test
