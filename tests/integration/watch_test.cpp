// `gpureap watch`: the policy daemon against real processes on simulated GPUs, the real binary.
// Each condition is triggered by a real workload, in dry-run (nothing signalled, a line says what
// would happen) and in enforce (the process ends, the memory is verified freed), with the grace
// period, the cap, reloads, notifications and a webhook; bystanders (a PPID-1 service, a running
// job's worker, a plain process) survive next to every target. Intervals are sub-second.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <httplib.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kill_support.hpp"
#include "mps_support.hpp"
#include "signals_settled.hpp"
#include "sim_harness.hpp"
#include "watch_support.hpp"

namespace gpureap::test {
namespace {


std::string enforce_header(const SimHost& host) {
  return std::string("mode = \"enforce\"\n") + kFast + "audit_log = \"" + host.state_dir() + "/audit.log\"\n" +
         "[terminate]\nkill_timeout = \"2s\"\nverify_timeout = \"5s\"\n";
}

std::string idle_rule(const std::string& grace) {
  return "[[rule]]\nname = \"idle\"\ncondition = \"idle\"\nidle_for = \"300ms\"\naction = \"terminate\"\ngrace = \"" + grace +
         "\"\n";
}

std::string pid_text(pid_t pid) { return std::to_string(pid); }

// Whether `pid` holds a descriptor of a file under `dir` (the simulated device nodes).
bool holds_any_of(pid_t pid, const std::string& dir) {
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    const auto target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (!ec && target.starts_with(dir + "/")) return true;
  }
  return false;
}

std::uint64_t used_bytes(const SimHost& host, unsigned gpu) {
  return gpu_entry(host.ps_json(), gpu)["memory"]["used_bytes"].get<std::uint64_t>();
}

TEST(Watch, CheckConfigPrintsTheRulesOrOneErrorLine) {
  SimHost host;
  // The example as a site would install it: its notify program exists (check-config refuses a
  // missing one, as the daemon does), and its audit log's directory, /var/log/gpureap (the
  // unit's LogsDirectory), is replaced by --audit-log.
  std::string text = read_text_file(std::string(GPUREAP_DEPLOY_DIR) + "/../docs/watch-policy.example.toml");
  const std::string program = "/usr/local/bin/gpu-notify-owner";
  ASSERT_NE(text.find(program), std::string::npos);
  const std::string notify = write_file(host, "gpu-notify-owner", "#!/bin/sh\ncat >/dev/null\n");
  ASSERT_EQ(chmod(notify.c_str(), 0755), 0);
  text.replace(text.find(program), program.size(), notify);
  const std::string example = write_file(host, "example.toml", text);
  auto result = host.gpureap({"watch", "--check-config", example, "--audit-log", host.state_dir() + "/audit.log"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("valid, 5 rules"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("rule idle-notebooks: idle for 2h00m"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("mode: dry-run"), std::string::npos) << result.out;

  const std::string bad = write_file(host, "bad.toml", "mode = \"enforce\"\n[[rule]]\nname = \"x\"\ncondition = \"idle\"\nidle_for = \"soon\"\n");
  for (const auto& argv : {std::vector<std::string>{"watch", "--check-config", bad}, {"watch", "--policy", bad}}) {
    result = host.gpureap(argv);
    EXPECT_EQ(result.exit_code, 2) << argv.back();
    EXPECT_EQ(result.err, "gpureap watch: " + bad + ":5:12: idle_for soon: not a duration: give seconds from 0.01 to " +
                              "31536000 (365d), such as 10, 2.5, 500ms, 90s or 5m\n");
  }
}

TEST(Watch, RefusesToStartWhatCannotRunWithOneLine) {
  SimHost host;  // two GPUs
  const std::string no_audit = write_file(host, "no-audit.toml", "mode = \"enforce\"\n" + idle_rule("0s"));
  auto result = host.gpureap({"watch", "--policy", no_audit});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("every signal must be in an audit log"), std::string::npos) << result.err;

  const std::string gpu7 = write_file(
      host, "gpu7.toml", std::string(kFast) + "[[rule]]\nname = \"g\"\ncondition = \"orphan\"\ngpus = [7]\n");
  result = host.gpureap({"watch", "--policy", gpu7});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(result.err, "gpureap watch: " + gpu7 + ":6:9: rule \"g\": gpus: no GPU 7 on this host (it has: 0, 1)\n");
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;

  result = host.gpureap({"watch", "--policy", host.state_dir() + "/missing.toml"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("missing.toml: cannot open it"), std::string::npos) << result.err;
  result = host.gpureap({"watch", "--policy", no_audit, "--interval", "nan"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find("--interval nan"), std::string::npos) << result.err;
}

TEST(Watch, IdleInDryRunIsAnnouncedAndNothingIsSignalled) {
  SimHost host;
  auto idle = host.start({"--alloc", "0:1GiB"});
  auto busy = host.start({"--alloc", "1:1GiB", "--sm-util", "60"});
  const std::string policy = write_file(host, "policy.toml", std::string(kFast) + idle_rule("0s"));
  BackgroundWatch watch(host, policy);
  const auto notice = watch.wait_for("notice", {{"pid", pid_text(idle.pid)}, {"rule", "idle"}});
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->priority, 5);
  EXPECT_EQ(notice->field("mode"), "dry-run");
  EXPECT_EQ(notice->field("gpus"), "0");
  EXPECT_EQ(notice->field("memory"), "1.0 GiB");
  const auto would = watch.wait_for("would-terminate", {{"pid", pid_text(idle.pid)}});
  ASSERT_TRUE(would);
  EXPECT_NE(would->field("message").find("dry run: would end PID " + pid_text(idle.pid)), std::string::npos);
  watch.wait_for("scan");  // a later look: the busy process has been judged as often
  EXPECT_EQ(watch.count("notice", {{"pid", pid_text(busy.pid)}}), 0u) << "a busy process is not idle";
  EXPECT_EQ(watch.count("would-terminate"), 1u) << "announced once while it matches";
  EXPECT_TRUE(running(idle.pid));
  EXPECT_TRUE(running(busy.pid));
  EXPECT_EQ(used_bytes(host, 0), 1 * GiB);
  EXPECT_FALSE(std::filesystem::exists(host.state_dir() + "/audit.log"));
  EXPECT_EQ(watch.stop(), 0);
  EXPECT_EQ(watch.count("stop", {{"signal", "SIGTERM"}}), 1u);
}

// The idle rule asks for a quiet CPU as well as a quiet GPU: a process whose data loader keeps
// a tenth of a core busy while the driver sees its GPU idle is not idle; its quiet neighbour,
// seen at the same looks, is. Walking, the CPU is read at every look; with the kernel's events
// (root), a holder's CPU is read with the driver, every 200 ms here (a tenth of idle_for).
class WatchIdleCpu : public ::testing::TestWithParam<bool> {};

TEST_P(WatchIdleCpu, AProcessUsingTheCpuIsNotIdleAndItsQuietNeighbourIs) {
  const bool events = GetParam();
  if (events && !running_as_root()) GTEST_SKIP() << "the kernel's holder events need root";
  SimHost host;
  auto busy = host.start({"--alloc", "0:1GiB", "--cpu-percent", "10"});
  auto quiet = host.start({"--alloc", "0:1GiB"});
  const std::string policy =
      write_file(host, "policy.toml",
                 "interval = \"100ms\"\nfull_scan_interval = \"1h\"\n"
                 "[[rule]]\nname = \"idle\"\ncondition = \"idle\"\nidle_for = \"2s\"\naction = \"log\"\n");
  const std::map<std::string, std::string> walking{{"GPUREAP_HOLDER_EVENTS", "off"}};
  BackgroundWatch watch(host, policy, {}, events ? std::map<std::string, std::string>{} : walking);
  const auto start = watch.wait_for("start");
  ASSERT_TRUE(start);
  EXPECT_EQ(start->field("driver_reads"), events ? "0.2s" : "every-look");
  const auto notice = watch.wait_for("notice", {{"pid", pid_text(quiet.pid)}, {"rule", "idle"}}, 20000);
  ASSERT_TRUE(notice) << "the quiet process was never found idle";
  EXPECT_EQ(watch.count("notice", {{"pid", pid_text(busy.pid)}}), 0u)
      << "judged at the same looks as its quiet neighbour, a process using the CPU was found idle";
  EXPECT_EQ(watch.stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Watch, WatchIdleCpu, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "WithEvents" : "Walking"; });

// A watch whose idle rule reads the driver every minute and whose over-age rule notices both
// processes; `subject` is SIGKILLed. Its end must be heard within 20 s, long before the
// driver's next reading, and nothing said of `beside`.
void expect_end_heard_before_the_drivers_next_reading(const SimHost& host, pid_t subject, pid_t beside,
                                                      const char* why_not) {
  const std::string policy =
      write_file(host, "policy.toml",
                 "interval = \"100ms\"\nfull_scan_interval = \"1h\"\n"
                 "[[rule]]\nname = \"idle\"\ncondition = \"idle\"\nidle_for = \"1h\"\naction = \"log\"\n"
                 "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"100ms\"\naction = \"log\"\n");
  BackgroundWatch watch(host, policy);
  const auto start = watch.wait_for("start");
  ASSERT_TRUE(start);
  EXPECT_EQ(start->field("driver_reads"), "1m00s");
  ASSERT_TRUE(watch.wait_for("notice", {{"rule", "old"}, {"pid", pid_text(subject)}}));
  ASSERT_TRUE(watch.wait_for("notice", {{"rule", "old"}, {"pid", pid_text(beside)}}));
  ASSERT_EQ(::kill(subject, SIGKILL), 0);
  EXPECT_TRUE(watch.wait_for("gone", {{"rule", "old"}, {"pid", pid_text(subject)}}, 20000)) << why_not;
  EXPECT_EQ(watch.count("gone", {{"pid", pid_text(beside)}}), 0u);
  EXPECT_TRUE(running(beside));
  EXPECT_EQ(watch.stop(), 0);
}

// With the kernel's events, a holder's stat is read only when the driver is: its end is still
// known at once, from the events, and the rules hear that it is gone.
TEST(Watch, AFollowedHoldersEndIsHeardAtOnceWhileTheDriverIsReadEveryMinute) {
  if (!running_as_root()) GTEST_SKIP() << "the kernel's holder events need root";
  SimHost host;
  auto old = host.start({"--alloc", "0:1GiB"});
  auto beside = host.start({"--alloc", "1:1GiB"});
  expect_end_heard_before_the_drivers_next_reading(host, old.pid, beside.pid,
                                                   "the followed holder's end waited for the driver's next reading");
}

// An MPS client's end makes no holder event: no device file of its own (the server holds
// them), so its stat is still read at every look, and its end is seen at the next one.
TEST(Watch, AnMpsClientsEndIsSeenAtTheNextLookWhileTheDriverIsReadEveryMinute) {
  if (!running_as_root()) GTEST_SKIP() << "the kernel's holder events need root";
  SimHost host({"--gpus", "1"});
  MpsDaemon daemon(host, "mps");
  ASSERT_TRUE(daemon.running()) << daemon.error();
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", daemon.pipe());
  auto client = host.start({"--alloc", "0:1GiB"});
  auto beside = host.start({"--alloc", "0:1GiB"});
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", "");
  ASSERT_FALSE(holds_any_of(client.pid, host.dev_dir())) << "a client holding a device file tests nothing here";
  expect_end_heard_before_the_drivers_next_reading(host, client.pid, beside.pid,
                                                   "the MPS client's end waited for the driver's next reading");
}

TEST(Watch, IdleInEnforceEndsTheJobAndItsWorkersVerifiesTheMemoryAndSparesBystanders) {
  SimHost host;
  const Service service(host);                                                    // PPID 1, holds GPU 0's file
  auto working = host.start({"--alloc", "0:1GiB", "--workers", "1", "--sm-util", "40"});  // a running job
  auto plain = host.start({});                                                     // no GPU at all
  auto idle = host.start({"--alloc", "0:2GiB", "--workers", "2"});
  const std::string policy = write_file(host, "policy.toml", enforce_header(host) + idle_rule("0s"));
  BackgroundWatch watch(host, policy);
  const auto ended = watch.wait_for("terminate", {{"pid", pid_text(idle.pid)}});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->field("outcome"), "exited") << ended->raw;
  EXPECT_EQ(ended->field("verified"), "yes") << ended->raw;
  EXPECT_EQ(ended->field("freed"), "2.0 GiB") << ended->raw;
  for (pid_t pid : {idle.pid, idle.workers[0], idle.workers[1]}) {
    EXPECT_TRUE(eventually([&] { return !running(pid); })) << pid;
  }
  EXPECT_EQ(used_bytes(host, 0), 1 * GiB) << "only the running job's memory is left";
  EXPECT_EQ(watch.stop(), 0);
  for (pid_t pid : {service.pid, working.pid, working.workers[0], plain.pid}) EXPECT_TRUE(running(pid)) << pid;
  const auto audit = audit_lines(host.state_dir() + "/audit.log");
  EXPECT_TRUE(audited(audit, idle.pid, "SIGTERM"));
  for (pid_t pid : idle.workers) EXPECT_TRUE(audited(audit, pid, "SIGTERM")) << pid;
  for (pid_t pid : {service.pid, working.pid, working.workers[0], plain.pid}) EXPECT_FALSE(audited_any(audit, pid)) << pid;
  for (const auto& line : audit) {
    if (line.value("pid", 0) == idle.pid) {
      EXPECT_EQ(line.value("reason", ""), "gpureap watch: rule idle (idle)");
    }
  }
}

// runuser stops itself when its child stops: after watch's SIGSTOP freeze
// it is continued, reaps its child and exits; nothing outside the plan is left stopped.
TEST(Watch, EnforceLeavesARunuserParentRunning) {
  if (!running_as_root() || access("/usr/sbin/runuser", X_OK) != 0) GTEST_SKIP() << "needs root and runuser";
  ASSERT_NE(test_user(), nullptr);
  SimHost host;
  auto idle = host.start_through({"/usr/sbin/runuser", "-u", kTestUserName, "--"},
                                 {"--alloc", "0:1GiB", "--on-sigterm", "ignore"});
  ASSERT_GT(idle.pid, 0) << idle.ready_line;
  const std::string policy = write_file(
      host, "policy.toml",
      std::string("mode = \"enforce\"\n") + kFast + "audit_log = \"" + host.state_dir() + "/audit.log\"\n" +
          "[terminate]\nkill_timeout = \"300ms\"\nverify_timeout = \"5s\"\n" + idle_rule("0s"));
  BackgroundWatch watch(host, policy);
  const auto ended = watch.wait_for("terminate", {{"pid", pid_text(idle.pid)}});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->field("outcome"), "killed") << ended->raw;
  EXPECT_NE(idle.wait_exit(3000), -1) << "runuser left in state " << process_state(idle.launcher_pid);
  EXPECT_EQ(watch.stop(), 0);
  EXPECT_TRUE(audited(audit_lines(host.state_dir() + "/audit.log"), idle.launcher_pid, "SIGCONT"));
}

TEST(Watch, TheGracePeriodComesBetweenTheNoticeAndTheAction) {
  SimHost host;
  auto idle = host.start({"--alloc", "0:1GiB"});
  const std::string policy = write_file(host, "policy.toml", enforce_header(host) + idle_rule("1s"));
  BackgroundWatch watch(host, policy);
  const auto notice = watch.wait_for("notice", {{"pid", pid_text(idle.pid)}});
  ASSERT_TRUE(notice);
  EXPECT_EQ(notice->field("due_in"), "1s");
  EXPECT_NE(notice->field("message").find("will be ended in 1s if it still matches"), std::string::npos);
  EXPECT_TRUE(running(idle.pid)) << "ended at the notice";
  const auto ended = watch.wait_for("terminate", {{"pid", pid_text(idle.pid)}});
  ASSERT_TRUE(ended);
  const double waited = std::chrono::duration<double>(ended->seen_at - notice->seen_at).count();
  EXPECT_GE(waited, 0.9) << "acted before the grace had passed";
  EXPECT_EQ(ended->field("outcome"), "exited");
  EXPECT_FALSE(running(idle.pid));
  EXPECT_EQ(watch.stop(), 0);
}

TEST(Watch, TheCapEndsAtMostNPerWindowAndDefersTheRest) {
  SimHost host;
  std::vector<SimProcess> jobs;
  for (int i = 0; i < 3; ++i) jobs.push_back(host.start({"--alloc", "0:1GiB"}));
  const std::string policy = write_file(
      host, "policy.toml", enforce_header(host) + "[limits]\nmax_terminations = 1\nwindow = \"1h\"\n" + idle_rule("0s"));
  BackgroundWatch watch(host, policy);
  const auto ended = watch.wait_for("terminate");
  ASSERT_TRUE(ended);
  // The other two are deferred, each said once.
  std::vector<std::string> capped;
  for (const auto& job : jobs) {
    if (pid_text(job.pid) == ended->field("pid")) continue;
    capped.push_back(pid_text(job.pid));
    EXPECT_TRUE(watch.wait_for("capped", {{"pid", capped.back()}}));
  }
  ASSERT_EQ(capped.size(), 2u);
  watch.wait_for("scan");
  EXPECT_EQ(watch.count("terminate"), 1u);
  int alive = 0;
  for (const auto& job : jobs) alive += running(job.pid) ? 1 : 0;
  EXPECT_EQ(alive, 2);
  for (const auto& pid : capped) EXPECT_EQ(watch.count("capped", {{"pid", pid}}), 1u) << "counted once: " << pid;
  EXPECT_EQ(watch.stop(), 0);
}

TEST(Watch, OverAgeAndMemoryRulesMatchWhatTheySay) {
  SimHost host;
  auto big = host.start({"--alloc", "0:2GiB"});
  auto small = host.start({"--alloc", "1:512MiB"});
  const std::string policy = write_file(host, "policy.toml",
                                        std::string(kFast) +
                                            "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"200ms\"\n"
                                            "[[rule]]\nname = \"big\"\ncondition = \"memory\"\nmemory_above = \"1GiB\"\n");
  BackgroundWatch watch(host, policy);
  for (pid_t pid : {big.pid, small.pid}) {
    const auto old = watch.wait_for("notice", {{"rule", "old"}, {"pid", pid_text(pid)}});
    ASSERT_TRUE(old);
    EXPECT_EQ(old->field("condition"), "over-age");
    EXPECT_EQ(old->field("action"), "log");
  }
  const auto memory = watch.wait_for("notice", {{"rule", "big"}, {"pid", pid_text(big.pid)}});
  ASSERT_TRUE(memory);
  EXPECT_NE(memory->field("message").find("holds 2.0 GiB of GPU memory, more than 1.0 GiB"), std::string::npos);
  watch.wait_for("scan");
  EXPECT_EQ(watch.count("notice", {{"rule", "big"}, {"pid", pid_text(small.pid)}}), 0u);
  EXPECT_EQ(watch.stop(), 0);
  EXPECT_TRUE(running(big.pid) && running(small.pid)) << "log rules signal nothing";
}

// `setsid -f sh -c SCRIPT FILE ARG`: a process tree in a session of its own, as a login or a
// batch system starts one; SCRIPT writes the PIDs the test needs into FILE.1, FILE.2, ...
// Those PIDs are SIGKILLed when the test ends.
struct DetachedTree {
  std::vector<pid_t> pids;
  DetachedTree(const SimHost& host, const std::string& name, const std::string& script, const std::string& arg,
               std::size_t count) {
    const std::string file = host.state_dir() + "/" + name;
    // Not the test's pipes: run_command would wait for them to close.
    const auto started = run_command(
        {"/usr/bin/setsid", "-f", "/bin/sh", "-c", "exec </dev/null >/dev/null 2>&1; " + script, file, arg});
    EXPECT_EQ(started.exit_code, 0) << started.err;
    for (std::size_t i = 1; i <= count; ++i) {
      pid_t pid = -1;
      EXPECT_TRUE(eventually([&] {
        std::ifstream in(file + "." + std::to_string(i));
        return static_cast<bool>(in >> pid) && pid > 0;
      })) << name << "." << i;
      pids.push_back(pid);
    }
  }
  ~DetachedTree() {
    for (pid_t pid : pids) {
      if (pid > 0) ::kill(pid, SIGKILL);
    }
  }
};

// Orphans and zombies that arise while watch runs, with no full scan due for an hour, are
// noticed within seconds, and without every look becoming a full scan:
// - a job's owner SIGKILLed and left unreaped: a zombie the driver still lists, because its
//   forked workers keep its context; the workers are orphans (their group leader is dead);
// - the leader of a process group whose member holds a GPU's device file (without a context,
//   so nothing the driver lists changes) SIGKILLed: the member is an orphan;
// - a child of a device-file holder killed and never reaped: a zombie of a GPU process.
// The orphans are ended (enforce); the zombie rule only logs. A PPID-1 service, a running
// job's worker and a plain process are never touched.
TEST(Watch, OrphansAndZombiesArisingBetweenFullScansAreNoticedWithinSecondsAndBystandersAreSpared) {
  SimHost host;
  const Service service(host);
  auto working = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  auto plain = host.start({});
  auto job = host.start({"--alloc", "0:2GiB", "--workers", "2"});
  // Leader sh (1) and its group's member (2), which holds /dev/nvidia1.
  const DetachedTree group(host, "group", "echo $$ > \"$0.1\"; sleep 1000 3<\"$1\" & echo $! > \"$0.2\"; wait",
                           host.dev_dir() + "/nvidia1", 2);
  // A child (1) of a holder that never reaps: `sleep` holding /dev/nvidia1 (a session leader,
  // like a service: no orphan either).
  const DetachedTree parent(host, "parent", "sleep 1000 & echo $! > \"$0.1\"; echo $$ > \"$0.2\"; exec sleep 1000 3<\"$1\"",
                            host.dev_dir() + "/nvidia1", 2);
  ASSERT_TRUE(eventually([&] {
    const auto ps = host.ps_json();
    return find_holder(ps, group.pids[1]) != nullptr && find_holder(ps, parent.pids[1]) != nullptr;
  }));
  const std::string policy = write_file(
      host, "policy.toml",
      "mode = \"enforce\"\ninterval = \"100ms\"\nfull_scan_interval = \"1h\"\naudit_log = \"" + host.state_dir() +
          "/audit.log\"\n[terminate]\nkill_timeout = \"2s\"\nverify_timeout = \"5s\"\n"
          "[[rule]]\nname = \"orphans\"\ncondition = \"orphan\"\naction = \"terminate\"\ngrace = \"0s\"\n"
          "[[rule]]\nname = \"zombies\"\ncondition = \"zombie\"\naction = \"log\"\n");
  BackgroundWatch watch(host, policy);
  ASSERT_TRUE(watch.wait_for("start"));
  // Noticed (logged) within this many ms; the full scan due next is an hour away. Ending what
  // was noticed (the kill engine's ladder and verification) gets the usual 10 s.
  constexpr int kNoticedWithin = 5000;

  ASSERT_EQ(::kill(job.pid, SIGKILL), 0);  // not reaped until the end of the test
  ASSERT_TRUE(watch.wait_for("notice", {{"rule", "zombies"}, {"pid", pid_text(job.pid)}}, kNoticedWithin));
  for (pid_t worker : job.workers) {
    ASSERT_TRUE(watch.wait_for("notice", {{"rule", "orphans"}, {"pid", pid_text(worker)}}, kNoticedWithin));
  }
  for (pid_t worker : job.workers) {
    const auto ended = watch.wait_for("terminate", {{"rule", "orphans"}, {"pid", pid_text(worker)}});
    ASSERT_TRUE(ended);
    EXPECT_EQ(ended->field("outcome"), "exited") << ended->raw;
    EXPECT_TRUE(eventually([&] { return !running(worker); })) << worker;
  }
  EXPECT_TRUE(eventually([&] { return used_bytes(host, 0) == 1 * GiB; })) << "the orphans' 2 GiB came back";
  job.wait_exit();

  ASSERT_EQ(::kill(group.pids[0], SIGKILL), 0);
  ASSERT_TRUE(watch.wait_for("notice", {{"rule", "orphans"}, {"pid", pid_text(group.pids[1])}}, kNoticedWithin));
  const auto member = watch.wait_for("terminate", {{"rule", "orphans"}, {"pid", pid_text(group.pids[1])}});
  ASSERT_TRUE(member);
  EXPECT_EQ(member->field("outcome"), "exited") << member->raw;

  ASSERT_EQ(::kill(parent.pids[0], SIGKILL), 0);
  ASSERT_TRUE(watch.wait_for("notice", {{"rule", "zombies"}, {"pid", pid_text(parent.pids[0])}}, kNoticedWithin));

  // Ten more looks with nothing new: none of them is a full scan, and the bystanders, in
  // reach of every look, stay untouched. No event marks a quick look: the test watches for a
  // scan during ten intervals, then for the signals the bystanders would have been sent.
  const std::size_t scans = watch.count("scan");
  const auto ten_looks = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (watch.count("scan") == scans && std::chrono::steady_clock::now() < ten_looks) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(watch.stop(), 0);
  EXPECT_EQ(watch.count("scan"), scans);
  for (pid_t bystander : {service.pid, working.pid, working.workers[0], plain.pid, parent.pids[1]}) {
    EXPECT_TRUE(signals_settled(bystander)) << bystander;
  }
  const auto stop = watch.wait_for("stop");
  ASSERT_TRUE(stop);
  const auto looks = std::stoul(stop->field("looks")), full_scans = std::stoul(stop->field("full_scans"));
  RecordProperty("looks", static_cast<int>(looks));
  RecordProperty("full_scans", static_cast<int>(full_scans));
  EXPECT_LT(full_scans * 2, looks) << "most looks stay quick: " << stop->raw;
  EXPECT_TRUE(running(service.pid)) << "a service with PPID 1 is no orphan";
  EXPECT_TRUE(running(working.pid));
  EXPECT_TRUE(running(working.workers[0])) << "a running job's worker is no orphan";
  EXPECT_TRUE(running(plain.pid));
  EXPECT_TRUE(running(parent.pids[1])) << "a zombie's parent is only logged about";
  for (pid_t bystander : {service.pid, working.pid, working.workers[0], plain.pid, parent.pids[1]}) {
    EXPECT_EQ(watch.count("notice", {{"pid", pid_text(bystander)}}), 0u) << bystander;
  }
  EXPECT_FALSE(audited_any(audit_lines(host.state_dir() + "/audit.log"), parent.pids[1]));
}

// A user who starts and ends GPU processes in a loop asks for a full scan at nearly every look
// (a PID listed for the first time, a listed one gone): they come from the same bucket as the
// sentinels' (3 at once, one per 2 s), and what asked stays asked: a process that starts in the
// middle of the churn is still noticed.
TEST(Watch, GpuProcessesStartedAndEndedInALoopCannotMakeEveryLookAFullScan) {
  SimHost host;
  const std::string policy = write_file(host, "policy.toml",
                                        "interval = \"50ms\"\nfull_scan_interval = \"1h\"\n"
                                        "[[rule]]\nname = \"big\"\ncondition = \"memory\"\nmemory_above = \"1GiB\"\n");
  BackgroundWatch watch(host, policy);
  ASSERT_TRUE(watch.wait_for("start"));
  const auto churn_began = std::chrono::steady_clock::now();
  std::optional<SimProcess> big;
  int churned = 0;
  while (std::chrono::steady_clock::now() - churn_began < std::chrono::milliseconds(2500)) {
    auto brief = host.start({"--alloc", "0:64MiB"});
    if (churned == 5) big.emplace(host.start({"--alloc", "1:2GiB"}));
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // a look or so: it is listed
    ASSERT_EQ(::kill(brief.pid, SIGKILL), 0);
    brief.wait_exit();
    ++churned;
  }
  ASSERT_TRUE(big);
  EXPECT_TRUE(watch.wait_for("notice", {{"rule", "big"}, {"pid", pid_text(big->pid)}}, 5000))
      << "started amid the churn, noticed once a scan is to be had";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - churn_began).count();
  EXPECT_EQ(watch.stop(), 0);
  const auto stop = watch.wait_for("stop");
  ASSERT_TRUE(stop);
  const auto full_scans = std::stoul(stop->field("full_scans"));
  RecordProperty("churned", churned);
  RecordProperty("full_scans", static_cast<int>(full_scans));
  // The one at start, the bucket's 3, one per 2 s since, and one refilled while it stopped.
  EXPECT_LE(full_scans, 1 + 3 + static_cast<std::size_t>(seconds / 2) + 1)
      << churned << " GPU processes started and ended in " << seconds << " s: " << stop->raw;
}

TEST(Watch, SighupReloadsAGoodPolicyAndKeepsItWhenTheNextOneIsBad) {
  SimHost host;
  auto first = host.start({"--alloc", "0:1GiB"});
  const std::string rule = "[[rule]]\nname = \"{NAME}\"\ncondition = \"memory\"\nmemory_above = \"{SIZE}\"\n";
  const auto policy_text = [&](const std::string& name, const std::string& size) {
    std::string text = std::string(kFast) + rule;
    text.replace(text.find("{NAME}"), 6, name);
    text.replace(text.find("{SIZE}"), 6, size);
    return text;
  };
  const std::string policy = write_file(host, "policy.toml", policy_text("huge", "10GiB"));
  BackgroundWatch watch(host, policy);
  ASSERT_TRUE(watch.wait_for("start"));
  watch.wait_for("scan");
  EXPECT_EQ(watch.count("notice"), 0u);

  write_file(host, "policy.toml", policy_text("some", "512MiB"));
  watch.signal(SIGHUP);
  ASSERT_TRUE(watch.wait_for("reload", {{"rules", "1"}}));
  ASSERT_TRUE(watch.wait_for("notice", {{"rule", "some"}, {"pid", pid_text(first.pid)}}));

  write_file(host, "policy.toml", policy_text("some", "512MiB") + "surprise = true\n");
  watch.signal(SIGHUP);
  const auto failed = watch.wait_for("reload-failed");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->priority, 3);
  EXPECT_EQ(failed->field("why").rfind(policy + ":7:1: unknown key 'rule.surprise'", 0), 0u) << failed->raw;
  // The policy it had still runs.
  auto second = host.start({"--alloc", "1:1GiB"});
  ASSERT_TRUE(watch.wait_for("notice", {{"rule", "some"}, {"pid", pid_text(second.pid)}}));
  EXPECT_EQ(watch.stop(), 0);
}

TEST(Watch, TheNotificationCommandGetsTheEventAsArgumentsAndJson) {
  SimHost host;
  // A command line that tries to drive a terminal and to forge a log line.
  auto hostile = host.start({"--alloc", "0:1GiB", "--name", "evil\x1b]0;pwned\x07\nevent=terminate"});
  const std::string script = write_file(host, "notify.sh",
                                        "#!/bin/sh\nd='" + host.config_dir() + "'\nprintf '%s\\n' \"$@\" > \"$d/notify.args.tmp\"\n"
                                        "cat > \"$d/notify.json.tmp\"\nmv \"$d/notify.json.tmp\" \"$d/notify.json\"\n"
                                        "mv \"$d/notify.args.tmp\" \"$d/notify.args\"\n");
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  const std::string policy =
      write_file(host, "policy.toml",
                 std::string(kFast) + "[notify]\ncommand = [\"" + script + "\", \"--to\", \"ops\"]\n" +
                     "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"100ms\"\naction = \"notify\"\n");
  BackgroundWatch watch(host, policy);
  const auto sent = watch.wait_for("notification", {{"channel", "command"}, {"pid", pid_text(hostile.pid)}});
  ASSERT_TRUE(sent);
  EXPECT_EQ(sent->field("outcome"), "sent") << sent->raw;
  std::ifstream args_file(host.config_dir() + "/notify.args");
  std::vector<std::string> args;
  for (std::string line; std::getline(args_file, line);) args.push_back(line);
  const std::vector<std::string> expected = {"--to", "ops", "event=notice", "rule=old", "action=notify", "mode=dry-run",
                                             "pid=" + pid_text(hostile.pid), "uid=0", "user=root"};
  EXPECT_EQ(args, expected);
  std::ifstream json_file(host.config_dir() + "/notify.json");
  const auto event = nlohmann::json::parse(json_file);
  EXPECT_EQ(event["schema"], "gpureap.watch.event/1");
  EXPECT_EQ(event["event"], "notice");
  EXPECT_EQ(event["rule"], "old");
  EXPECT_EQ(event["process"]["pid"], hostile.pid);
  EXPECT_EQ(event["process"]["gpu_memory_bytes"], 1 * GiB);
  EXPECT_NE(event["process"]["command"].get<std::string>().find("evil\x1b]0;pwned\x07\nevent=terminate"), std::string::npos)
      << "the JSON keeps the exact bytes";
  EXPECT_EQ(watch.stop(), 0);
  for (const auto& line : watch.lines()) {
    EXPECT_EQ(line.raw.find('\x1b'), std::string::npos) << "a raw escape reached the log";
    EXPECT_EQ(line.raw.find('\x07'), std::string::npos);
  }
  EXPECT_EQ(watch.count("terminate"), 0u) << "a forged line";
}

TEST(Watch, ANotificationCommandPastItsTimeoutIsKilledAndReapedWithWhatItStarted) {
  SimHost host;
  auto old = host.start({"--alloc", "0:1GiB"});
  // It leaves a child in the background, as `( sleep 300 ) &` does, and then hangs itself.
  const std::string script =
      write_file(host, "hang.sh",
                 "#!/bin/sh\nd='" + host.config_dir() + "'\n/bin/sh -c 'echo $$ > \"$1/background.pid\"; exec sleep 300' sh \"$d\" &\n"
                 "echo $$ > \"$d/hang.pid\"\nexec sleep 60\n");
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  const std::string policy =
      write_file(host, "policy.toml",
                 std::string(kFast) + "[notify]\ncommand = [\"" + script + "\"]\ncommand_timeout = \"500ms\"\n" +
                     "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"100ms\"\naction = \"notify\"\n");
  BackgroundWatch watch(host, policy);
  const auto timed_out = watch.wait_for("notification", {{"channel", "command"}});
  ASSERT_TRUE(timed_out);
  EXPECT_EQ(timed_out->field("outcome"), "timeout") << timed_out->raw;
  EXPECT_EQ(timed_out->priority, 4);
  pid_t hung = -1;
  std::ifstream(host.config_dir() + "/hang.pid") >> hung;
  ASSERT_GT(hung, 0);
  EXPECT_EQ(process_state(hung), 0) << "the command was left running, or unreaped";
  pid_t background = -1;
  std::ifstream(host.config_dir() + "/background.pid") >> background;
  ASSERT_GT(background, 0);
  for (int i = 0; i < 100 && process_state(background) != 0 && process_state(background) != 'Z'; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(process_state(background) == 0 || process_state(background) == 'Z')
      << "the command's background child " << background << " outlived its timeout";
  EXPECT_EQ(watch.stop(), 0);
}

TEST(Watch, TheWebhookReceivesTheEvent) {
  SimHost host;
  auto old = host.start({"--alloc", "0:1GiB"});
  httplib::Server server;
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<std::string> bodies;
  std::string content_type;
  server.Post("/hook", [&](const httplib::Request& request, httplib::Response& response) {
    const std::lock_guard lock(mutex);
    bodies.push_back(request.body);
    content_type = request.get_header_value("Content-Type");
    response.status = 204;
    arrived.notify_all();
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread listener([&] { server.listen_after_bind(); });
  const std::string policy =
      write_file(host, "policy.toml",
                 std::string(kFast) + "[notify]\nwebhook = \"http://127.0.0.1:" + std::to_string(port) + "/hook\"\n" +
                     "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"100ms\"\naction = \"notify\"\n");
  {
    BackgroundWatch watch(host, policy);
    const auto sent = watch.wait_for("notification", {{"channel", "webhook"}});
    ASSERT_TRUE(sent);
    EXPECT_EQ(sent->field("outcome"), "sent") << sent->raw;
    EXPECT_EQ(watch.stop(), 0);
  }
  server.stop();
  listener.join();
  const std::lock_guard lock(mutex);
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_EQ(content_type, "application/json");
  const auto event = nlohmann::json::parse(bodies[0]);
  EXPECT_EQ(event["event"], "notice");
  EXPECT_EQ(event["process"]["pid"], old.pid);
}

TEST(Watch, AWebhookThatNeverAnswersTimesOutAndTheDaemonCarriesOn) {
  SimHost host;
  auto old = host.start({"--alloc", "0:1GiB"});
  // Accepts the connection (the kernel's backlog) and never reads or answers.
  const int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(listen(silent, 4), 0);
  socklen_t length = sizeof address;
  getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length);
  const std::string policy =
      write_file(host, "policy.toml",
                 std::string(kFast) + "[notify]\nwebhook = \"http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) +
                     "/hook?team=gpu\"\nwebhook_timeout = \"300ms\"\n" +
                     "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"100ms\"\naction = \"notify\"\n");
  BackgroundWatch watch(host, policy);
  const auto timed_out = watch.wait_for("notification", {{"channel", "webhook"}});
  ASSERT_TRUE(timed_out);
  EXPECT_EQ(timed_out->field("outcome"), "timeout") << timed_out->raw;
  EXPECT_TRUE(watch.wait_for("scan")) << "the looks go on";
  EXPECT_EQ(watch.stop(), 0);
  close(silent);
  EXPECT_TRUE(running(old.pid));
}

TEST(Watch, AWebhookWithoutTheHttpModuleIsRefusedAtStart) {
  SimHost host;
  // The binary alone, away from the build tree's gpureap-http.so.
  const std::string lonely = host.state_dir() + "/bin/gpureap";
  std::filesystem::create_directories(host.state_dir() + "/bin");
  std::filesystem::copy_file(gpureap_binary(), lonely);
  const std::string policy =
      write_file(host, "policy.toml",
                 std::string(kFast) + "[notify]\nwebhook = \"http://127.0.0.1:9/hook\"\n" +
                     "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"1h\"\naction = \"notify\"\n");
  SpawnOptions options;
  options.env = host.env();
  const auto result = run_command({lonely, "watch", "--policy", policy}, options);
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("notify.webhook needs the HTTP module"), std::string::npos) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
}

TEST(Watch, ALostGpuFreezesItsProcessesAndTheDaemonCarriesOn) {
  SimHost host;
  auto idle = host.start({"--alloc", "0:1GiB"});
  const std::string policy = write_file(host, "policy.toml", enforce_header(host) + idle_rule("500ms"));
  BackgroundWatch watch(host, policy);
  ASSERT_TRUE(watch.wait_for("notice", {{"pid", pid_text(idle.pid)}}));
  host.ctl({"set", "--gpu", "0", "lost=1"});
  const auto lost = watch.wait_for("gpu-unreadable", {{"gpu", "0"}});
  ASSERT_TRUE(lost);
  // Full scans over more than the grace (2 x 300 ms > 500 ms): nothing is done to what cannot
  // be judged.
  EXPECT_TRUE(watch.wait_for_count("scan", {{"frozen", "1"}}, 2));
  EXPECT_EQ(watch.count("terminate"), 0u);
  EXPECT_TRUE(running(idle.pid));
  host.ctl({"set", "--gpu", "0", "lost=0"});
  const auto ended = watch.wait_for("terminate", {{"pid", pid_text(idle.pid)}});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->field("outcome"), "exited");
  EXPECT_EQ(watch.stop(), 0);
}

// Each condition that has no timer of its own, triggered by a real workload, in both modes:
// dry-run announces the action and signals nothing; enforce takes it (the process ends and its
// memory is verified freed; a zombie's parent is reminded and lives). A plain process and a
// PPID-1 service beside the target are never touched.
struct ConditionCase {
  const char* condition;
  const char* keys;  // the condition's own keys
  bool enforce;
};

void PrintTo(const ConditionCase& c, std::ostream* out) { *out << c.condition << (c.enforce ? ", enforce" : ", dry-run"); }

class WatchConditions : public ::testing::TestWithParam<ConditionCase> {};

TEST_P(WatchConditions, AnnouncedInDryRunActedOnInEnforce) {
  const ConditionCase& c = GetParam();
  SimHost host;
  std::optional<Service> service;  // beside every destructive path; a dry run signals nothing at all
  if (c.enforce) service.emplace(host);
  auto plain = host.start({});
  const std::string condition = c.condition;
  SimProcess target, small;
  pid_t subject = -1;  // the process the rule is about
  if (condition == "orphan") {
    target = orphaned_job(host, "0:2GiB");
    subject = target.workers[0];
  } else if (condition == "zombie") {
    target = host.start({"--alloc", "0:1GiB", "--zombie-child"});
  } else {
    target = host.start({"--alloc", "0:2GiB"});
    small = host.start({"--alloc", "1:512MiB", "--sm-util", "50"});  // on another GPU, small, busy
    subject = target.pid;
  }
  const std::string header = c.enforce ? enforce_header(host) : std::string(kFast);
  const std::string policy = write_file(host, "policy.toml",
                                        header + "[[rule]]\nname = \"r\"\ncondition = \"" + condition + "\"\n" + c.keys +
                                            "action = \"terminate\"\ngrace = \"0s\"\n");
  BackgroundWatch watch(host, policy);
  const std::map<std::string, std::string> about =
      condition == "zombie" ? std::map<std::string, std::string>{{"rule", "r"}}
                            : std::map<std::string, std::string>{{"rule", "r"}, {"pid", pid_text(subject)}};
  if (!c.enforce) {
    const auto would = watch.wait_for("would-terminate", about);
    ASSERT_TRUE(would);
    EXPECT_NE(would->field("message").find("dry run: would"), std::string::npos) << would->raw;
    watch.wait_for("scan");
    if (subject > 0) {
      EXPECT_TRUE(running(subject));
    }
    EXPECT_TRUE(running(target.pid) || condition == "orphan");
    EXPECT_FALSE(std::filesystem::exists(host.state_dir() + "/audit.log"));
  } else {
    const auto done = watch.wait_for("terminate", about);
    ASSERT_TRUE(done);
    if (condition == "zombie") {
      EXPECT_EQ(done->field("outcome"), "parent-nudged") << done->raw;
      EXPECT_TRUE(running(target.pid)) << "a zombie's parent is reminded, never ended";
    } else {
      EXPECT_EQ(done->field("outcome"), "exited") << done->raw;
      EXPECT_TRUE(eventually([&] { return !running(subject); }));
      if (condition != "orphan") {  // the orphans' memory comes back when the last of them ends
        EXPECT_EQ(done->field("verified"), "yes") << done->raw;
        EXPECT_EQ(done->field("freed"), "2.0 GiB") << done->raw;
      }
    }
  }
  if (small.pid > 0) {
    EXPECT_EQ(watch.count("notice", {{"pid", pid_text(small.pid)}}), 0u);
    EXPECT_TRUE(running(small.pid));
  }
  EXPECT_EQ(watch.stop(), 0);
  if (service) {
    EXPECT_TRUE(running(service->pid));
  }
  EXPECT_TRUE(running(plain.pid));
  if (c.enforce && condition == "zombie") {
    EXPECT_TRUE(audited(audit_lines(host.state_dir() + "/audit.log"), target.pid, "SIGCHLD"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Watch, WatchConditions,
    ::testing::Values(ConditionCase{"over-age", "older_than = \"300ms\"\ngpus = [0]\n", false},
                      ConditionCase{"over-age", "older_than = \"300ms\"\ngpus = [0]\n", true},
                      ConditionCase{"memory", "memory_above = \"1GiB\"\n", false},
                      ConditionCase{"memory", "memory_above = \"1GiB\"\n", true},
                      ConditionCase{"orphan", "", false},  // enforce: OrphansAndZombiesArisingBetweenFullScans... above
                      ConditionCase{"zombie", "", false}, ConditionCase{"zombie", "", true}),
    [](const ::testing::TestParamInfo<ConditionCase>& condition) {
      std::string name = condition.param.condition;
      std::erase(name, '-');
      return name + (condition.param.enforce ? "Enforce" : "DryRun");
    });

}  // namespace
}  // namespace gpureap::test
