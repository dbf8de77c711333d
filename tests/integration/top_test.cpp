// `gpureap top` as a person uses it: the real binary on a terminal (tmux), simulated GPUs held
// by real processes. What is on the screen after each key, and what happened to the processes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "drm_host_support.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "text/truncate.hpp"
#include "tmux_screen.hpp"

namespace gpureap::test {
namespace {

std::map<std::string, std::string> top_env(const SimHost& host, std::map<std::string, std::string> extra = {}) {
  auto env = host.env();
  env["LANG"] = "C.UTF-8";
  // An empty configuration, whatever this host's /etc/gpureap says.
  const std::string config = host.config_dir() + "/top-config.toml";
  std::ofstream{config};
  env["GPUREAP_CONFIG"] = config;
  for (auto& [name, value] : extra) env[name] = value;
  return env;
}

// gpureap top ARGS in a 120x40 terminal (or as given), on `host`.
std::unique_ptr<TmuxScreen> start_top(const SimHost& host, std::vector<std::string> args = {},
                                      std::map<std::string, std::string> env = {}, int columns = 120, int rows = 40,
                                      std::vector<std::string> prefix = {}) {
  // A prefix switches to another user: this build's files where that user can reach them.
  std::vector<std::string> argv = prefix;
  argv.push_back(prefix.empty() ? gpureap_binary() : reachable_by_other_users(gpureap_binary()));
  argv.push_back("top");
  argv.insert(argv.end(), args.begin(), args.end());
  auto top_environment = top_env(host, std::move(env));
  if (!prefix.empty()) top_environment = env_for_other_users(std::move(top_environment));
  return std::make_unique<TmuxScreen>(argv, top_environment, columns, rows, host.state_dir());
}

// The screen line of this PID's row: the PID as a column of its own, after the GPU.
std::string row_of(const std::string& screen, pid_t pid) {
  std::istringstream in(screen);
  const std::string word = " " + std::to_string(pid) + " ";
  for (std::string line; std::getline(in, line);) {
    if (line.find(word) != std::string::npos && line.find("gpureap top") == std::string::npos) return line;
  }
  return {};
}

// Index of the line holding this PID's row, or -1.
int row_index(const std::vector<std::string>& lines, pid_t pid) {
  const std::string word = " " + std::to_string(pid) + " ";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(word) != std::string::npos) return static_cast<int>(i);
  }
  return -1;
}

bool shows_row(const std::string& screen, pid_t pid) { return !row_of(screen, pid).empty(); }

// The cursor on `pid`'s row: the filter narrows the view to it.
void select_pid(const TmuxScreen& screen, pid_t pid) {
  screen.keys({"/"});
  screen.type(std::to_string(pid));
  screen.keys({"Enter"});
}

void quit(const TmuxScreen& screen) {
  screen.keys({"q"});
  EXPECT_EQ(screen.wait_exit(), 0) << screen.text();
}

class TopScreen : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!TmuxScreen::available()) GTEST_SKIP() << "tmux is not installed (scripts/setup-deps.sh installs it)";
  }
};

TEST_F(TopScreen, ShowsEachGpuProcessItsWorkersAndAnOrphanUnderItsDeadOwner) {
  SimHost host;
  auto job = host.start({"--alloc", "0:4GiB", "--workers", "2"});
  auto other = host.start({"--alloc", "1:1GiB"});
  auto orphaned = orphaned_job(host, "0:2GiB");
  auto top = start_top(host);
  ASSERT_TRUE(top->wait_until([&](const std::string& s) {
    return shows_row(s, job.pid) && shows_row(s, orphaned.workers[1]);
  })) << top->text();
  std::string screen = top->text();
  EXPECT_NE(row_of(screen, job.pid).find("4.0 GiB"), std::string::npos) << screen;
  EXPECT_NE(row_of(screen, other.pid).find("1.0 GiB"), std::string::npos) << screen;
  for (pid_t w : job.workers) {
    EXPECT_NE(row_of(screen, w).find("[worker of " + std::to_string(job.pid) + "]"), std::string::npos) << screen;
  }
  const std::string owner = row_of(screen, orphaned.pid);
  EXPECT_NE(owner.find("2.0 GiB"), std::string::npos) << screen;
  EXPECT_NE(owner.find("gone, kept by"), std::string::npos) << screen;
  EXPECT_NE(screen.find("GPU 0 NVIDIA"), std::string::npos) << screen;
  EXPECT_NE(screen.find("6.0 GiB/80.0 GiB"), std::string::npos) << screen;

  // The tree: each worker right under its process, the orphans under their dead owner.
  top->keys({"t"});
  ASSERT_TRUE(top->wait_for("└─ [orphan of PID " + std::to_string(orphaned.pid) + "]")) << top->text();
  const auto lines = top->lines();
  const int parent = row_index(lines, job.pid);
  ASSERT_GE(parent, 0);
  for (int i = 1; i <= 2; ++i) {
    const std::string& child = lines[static_cast<std::size_t>(parent + i)];
    EXPECT_NE(child.find(i == 1 ? "├─ [worker of" : "└─ [worker of"), std::string::npos) << top->text();
  }
  const int dead = row_index(lines, orphaned.pid);
  ASSERT_GE(dead, 0);
  for (int i = 1; i <= 2; ++i) {
    const std::string& child = lines[static_cast<std::size_t>(dead + i)];
    EXPECT_NE(child.find("[orphan of PID " + std::to_string(orphaned.pid) + "]"), std::string::npos) << top->text();
  }
  quit(*top);
}

// Without the kernel's holder events a new holder shows only when the refreshes look at it
// again: the status line says so, with why. With them (as root) it says nothing of the kind.
TEST_F(TopScreen, SaysOnItsStatusLineWhenNewHoldersWaitForALookWithoutEvents) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  auto walking = start_top(host, {}, {{"GPUREAP_HOLDER_EVENTS", "off"}});
  ASSERT_TRUE(walking->wait_until([&](const std::string& s) { return shows_row(s, job.pid); })) << walking->text();
  const std::string told = "holders found by walking /proc at every scan: GPUREAP_HOLDER_EVENTS=off";
  EXPECT_NE(walking->text().find(told), std::string::npos) << walking->text();
  quit(*walking);
  if (!running_as_root()) return;  // the events need CAP_SYS_ADMIN
  auto listening = start_top(host);
  // The status is set with the first snapshot's rows: once the row shows, it would show too.
  ASSERT_TRUE(listening->wait_until([&](const std::string& s) { return shows_row(s, job.pid); })) << listening->text();
  EXPECT_EQ(listening->text().find("holders found by walking /proc"), std::string::npos) << listening->text();
  quit(*listening);
}

TEST_F(TopScreen, FilterAndSortChooseAndOrderTheRows) {
  SimHost host;
  auto alpha = host.start({"--alloc", "0:3GiB", "--name", "alpha-train"});
  auto beta = host.start({"--alloc", "0:1GiB", "--name", "beta-eval"});
  auto gamma = host.start({"--alloc", "1:2GiB", "--name", "gamma-serve"});
  auto top = start_top(host);
  ASSERT_TRUE(top->wait_until([&](const std::string& s) { return shows_row(s, alpha.pid) && shows_row(s, gamma.pid); }))
      << top->text();
  // By memory, largest first.
  auto lines = top->lines();
  EXPECT_LT(row_index(lines, alpha.pid), row_index(lines, gamma.pid)) << top->text();
  EXPECT_LT(row_index(lines, gamma.pid), row_index(lines, beta.pid)) << top->text();
  // By PID.
  top->keys({"P"});
  ASSERT_TRUE(top->wait_for("sort: pid")) << top->text();
  lines = top->lines();
  EXPECT_LT(row_index(lines, alpha.pid), row_index(lines, beta.pid)) << top->text();
  EXPECT_LT(row_index(lines, beta.pid), row_index(lines, gamma.pid)) << top->text();
  // The filter is plain text, case folded: regular expression characters mean themselves.
  top->keys({"/"});
  top->type("BETA");
  top->keys({"Enter"});
  ASSERT_TRUE(top->wait_for("filter \"BETA\"")) << top->text();
  std::string screen = top->text();
  EXPECT_TRUE(shows_row(screen, beta.pid)) << screen;
  EXPECT_FALSE(shows_row(screen, alpha.pid)) << screen;
  EXPECT_FALSE(shows_row(screen, gamma.pid)) << screen;
  // `/` edits the filter in place; Esc while typing gives back the one before.
  top->keys({"/", "BSpace", "BSpace", "BSpace", "BSpace"});
  top->type("a.*");
  ASSERT_TRUE(top->wait_for("filter: a.*_")) << top->text();
  ASSERT_TRUE(top->wait_for("no row matches")) << top->text();
  top->keys({"Escape"});
  ASSERT_TRUE(top->wait_for("filter \"BETA\"")) << top->text();
  EXPECT_TRUE(shows_row(top->text(), beta.pid)) << top->text();
  // An empty filter shows every row again.
  top->keys({"/", "BSpace", "BSpace", "BSpace", "BSpace", "Enter"});
  ASSERT_TRUE(top->wait_until([&](const std::string& s) { return shows_row(s, alpha.pid) && shows_row(s, gamma.pid); }))
      << top->text();
  quit(*top);
}

TEST_F(TopScreen, EndingATaggedJobFreesItsMemoryAndSparesEveryBystander) {
  SimHost host;
  const Service service(host);  // PPID 1, holds GPU 0's device file
  auto job = host.start({"--alloc", "0:4GiB", "--workers", "2"});
  auto running_job = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  auto innocent = host.start({});
  const std::string audit = host.state_dir() + "/audit.log";
  auto top = start_top(host, {}, {{"GPUREAP_AUDIT_LOG", audit}});
  ASSERT_TRUE(top->wait_for(" " + std::to_string(job.pid) + " ")) << top->text();
  select_pid(*top, job.pid);
  top->keys({"Space"});
  ASSERT_TRUE(top->wait_for("1 tagged")) << top->text();
  top->keys({"K"});
  ASSERT_TRUE(top->wait_for("Will be signalled (3):")) << top->text();
  std::string screen = top->text();
  EXPECT_NE(screen.find("chosen in the view; the driver lists it on GPU 0 (4.0 GiB)"), std::string::npos) << screen;
  EXPECT_NE(screen.find("GPU 0: 4.0 GiB expected back"), std::string::npos) << screen;
  for (pid_t p : {service.pid, running_job.pid, running_job.workers[0], innocent.pid}) {
    EXPECT_EQ(screen.find(" " + std::to_string(p) + "  "), std::string::npos) << p << " is in the plan:\n" << screen;
  }
  EXPECT_TRUE(running(job.pid)) << "signalled before the confirmation";
  top->keys({"Enter"});
  ASSERT_TRUE(top->wait_for("GPU 0: 4.0 GiB verified free", 20000)) << top->text();
  EXPECT_NE(top->text().find("exited after SIGTERM"), std::string::npos) << top->text();
  for (pid_t p : {job.pid, job.workers[0], job.workers[1]}) {
    EXPECT_TRUE(eventually([&] { return !running(p); })) << "PID " << p << " survived";
  }
  for (pid_t p : {service.pid, running_job.pid, running_job.workers[0], innocent.pid}) {
    EXPECT_TRUE(running(p)) << "bystander " << p << " was ended";
  }
  // The rows of what ended leave the screen; the running job's stay.
  ASSERT_TRUE(top->wait_until([&](const std::string& s) { return !shows_row(s, job.pid); })) << top->text();
  // Every signal is in the audit log, none to a bystander.
  const auto lines = audit_lines(audit);
  for (pid_t p : {job.pid, job.workers[0], job.workers[1]}) EXPECT_TRUE(audited(lines, p, "SIGTERM")) << p;
  for (const auto& line : lines) {
    for (pid_t p : {service.pid, running_job.pid, running_job.workers[0], innocent.pid}) {
      EXPECT_NE(line.value("pid", 0), p) << "bystander " << p << " was signalled: " << line.dump();
    }
  }
  quit(*top);
}

// An AMD GPU's DRM client, held by a process and the worker it forked: one row for the client
// under the first PID, with its VRAM from fdinfo and the GPU as "D0", after NVIDIA's GPU; chosen
// and ended through the same pipeline as an NVIDIA process (plan, confirmation, ladder, audit).
TEST_F(TopScreen, ADrmClientIsShownOnceAndEndsThroughTheKillPipeline) {
  SimHost host({"--gpus", "1"});
  const std::string pci = "0000:03:00.0";
  DrmGpuSpec amd;
  amd.pci = pci;
  amd.card = 0;
  host.add_drm_gpu(amd);  // the simulated driver: fdinfo and the VRAM figure follow the processes
  auto client = host.start_drm_client({"--node", "renderD128", "--vram", "3GiB", "--workers", "1"});
  ASSERT_EQ(client.workers.size(), 1u);
  const std::string audit = host.state_dir() + "/audit.log";
  auto top = start_top(host, {}, {{"GPUREAP_AUDIT_LOG", audit}});
  ASSERT_TRUE(top->wait_for(" " + std::to_string(client.pid) + " ")) << top->text();
  std::string screen = top->text();
  EXPECT_NE(screen.find("GPU D0 amd " + pci + " amdgpu"), std::string::npos) << screen;
  const std::string row = row_of(screen, client.pid);
  EXPECT_NE(row.find("D0"), std::string::npos) << row;
  EXPECT_NE(row.find("3.0 GiB"), std::string::npos) << row;
  EXPECT_NE(row.find("[client shared with " + std::to_string(client.workers[0]) + "]"), std::string::npos) << row;
  EXPECT_FALSE(shows_row(screen, client.workers[0])) << "one row a client:\n" << screen;

  select_pid(*top, client.pid);
  top->keys({"Space"});
  ASSERT_TRUE(top->wait_for("1 tagged")) << top->text();
  top->keys({"K"});
  ASSERT_TRUE(top->wait_for("Will be signalled")) << top->text();
  EXPECT_NE(top->text().find("chosen in the view"), std::string::npos) << top->text();
  EXPECT_TRUE(running(client.pid)) << "signalled before the confirmation";
  top->keys({"Enter"});
  ASSERT_TRUE(top->wait_for("exited after SIGTERM", 20000)) << top->text();
  EXPECT_TRUE(eventually([&] { return !running(client.pid); })) << "PID " << client.pid << " survived";
  EXPECT_TRUE(audited(audit_lines(audit), client.pid, "SIGTERM"));
  // kill's check of the AMD GPU's release ran: the client gone, the figure down by its 3 GiB.
  EXPECT_TRUE(top->wait_for("amd GPU " + pci + ": 3.0 GiB freed", 20000)) << top->text();
  quit(*top);
}

// The gpureap top running on `host` (its environment names the host's state directory).
pid_t top_pid(const SimHost& host) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code error;
    const auto exe = std::filesystem::read_symlink("/proc/" + name + "/exe", error);
    if (error || exe != std::filesystem::path(gpureap_binary())) continue;
    if (read_text_file("/proc/" + name + "/environ").find(host.config_dir() + "/top-config.toml") != std::string::npos) {
      return static_cast<pid_t>(std::stoi(name));
    }
  }
  return -1;
}

char state_of(pid_t pid) {
  const std::string stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ? '?' : stat[close + 2];
}

// The ladder takes its interruption from top, and installs no signal handler
// of its own on top's worker thread: SIGTERM to top while a kill is in its ladder ends top
// (128+15) at the ladder's next step, and the job, which ignores SIGTERM, is left running,
// never stopped.
TEST_F(TopScreen, SigtermWhileAKillIsInItsLadderEndsTopAndLeavesNothingStopped) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--on-sigterm", "ignore"});
  const std::string audit = host.state_dir() + "/audit.log";
  auto top = start_top(host, {}, {{"GPUREAP_AUDIT_LOG", audit}});
  ASSERT_TRUE(top->wait_for(" " + std::to_string(job.pid) + " ")) << top->text();
  const pid_t gpureap = top_pid(host);
  ASSERT_GT(gpureap, 1);
  select_pid(*top, job.pid);
  top->keys({"K"});
  ASSERT_TRUE(top->wait_for("Will be signalled (1):")) << top->text();
  top->keys({"Enter"});  // SIGTERM, then SIGKILL after 10 s
  ASSERT_TRUE(eventually([&] { return audited(audit_lines(audit), job.pid, "SIGTERM"); })) << top->text();
  ASSERT_EQ(kill(gpureap, SIGTERM), 0);
  EXPECT_EQ(top->wait_exit(5000), 128 + SIGTERM) << "top went on after SIGTERM: " << top->text();
  EXPECT_TRUE(running(job.pid)) << "the ladder went on to SIGKILL";
  EXPECT_NE(state_of(job.pid), 'T') << "the job was left stopped";
  EXPECT_FALSE(audited(audit_lines(audit), job.pid, "SIGKILL"));
}

// runuser stops itself when its child stops. A kill from top stops the job before its SIGTERM
// (the audit log's sync made slow, so that runuser sees the stop): runuser, outside the plan,
// is continued, reaps its child and exits, as without gpureap, and the status line says so.
// The terminal closes while a kill from top is in its ladder, and top (in a session of its
// own, so no SIGHUP comes: only its input ends) must leave: the ladder, told by top, stops at
// its next step and continues what it stopped; the job, which ignores SIGTERM, keeps running
// and is never SIGKILLed. A ladder that listened only to signals of its own would have run on
// to SIGKILL after the 10 s timeout, with top waiting for it.
TEST_F(TopScreen, AClosedTerminalWhileAKillIsInItsLadderEndsTopAtTheNextStep) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB", "--on-sigterm", "ignore"});
  const std::string audit = host.state_dir() + "/audit.log";
  TmuxScreen top({"/usr/bin/setsid", gpureap_binary(), "top"}, top_env(host, {{"GPUREAP_AUDIT_LOG", audit}}), 120, 40,
                 host.state_dir());
  ASSERT_TRUE(top.wait_for(" " + std::to_string(job.pid) + " ")) << top.text();
  const pid_t gpureap = top_pid(host);
  ASSERT_GT(gpureap, 1);
  select_pid(top, job.pid);
  top.keys({"K"});
  ASSERT_TRUE(top.wait_for("Will be signalled (1):")) << top.text();
  top.keys({"Enter"});  // SIGTERM, then SIGKILL after 10 s
  ASSERT_TRUE(eventually([&] { return audited(audit_lines(audit), job.pid, "SIGTERM"); })) << top.text();
  top.hang_up();
  EXPECT_TRUE(eventually([&] { return !running(gpureap); }, 3000)) << "top went on after its terminal closed";
  EXPECT_TRUE(running(job.pid)) << "the ladder went on to SIGKILL";
  EXPECT_NE(state_of(job.pid), 'T') << "the job was left stopped";
  EXPECT_FALSE(audited(audit_lines(audit), job.pid, "SIGKILL"));
  if (running(gpureap)) ::kill(gpureap, SIGKILL);
}

TEST_F(TopScreen, KillingAJobStartedUnderRunuserLeavesRunuserRunning) {
  if (!running_as_root() || access("/usr/sbin/runuser", X_OK) != 0) GTEST_SKIP() << "needs root and runuser";
  ASSERT_NE(test_user(), nullptr);
  SimHost host;
  auto job = host.start_through({"/usr/sbin/runuser", "-u", kTestUserName, "--"}, {"--alloc", "0:1GiB"});
  ASSERT_GT(job.pid, 0) << job.ready_line;
  ASSERT_NE(job.pid, job.launcher_pid) << "the program runs as runuser's child";
  const std::string audit = host.state_dir() + "/audit.log";
  auto top = start_top(host, {},
                       {{"GPUREAP_AUDIT_LOG", audit}, {"LD_PRELOAD", SLOW_FDATASYNC_LIBRARY},
                        {"GPUREAP_TEST_FDATASYNC_MS", "100"}});
  ASSERT_TRUE(top->wait_for(" " + std::to_string(job.pid) + " ")) << top->text();
  select_pid(*top, job.pid);
  top->keys({"K"});
  ASSERT_TRUE(top->wait_for("Will be signalled (1):")) << top->text();
  top->keys({"Enter"});
  const int status = job.wait_exit(5000);
  ASSERT_NE(status, -1) << "runuser did not exit; state " << state_of(job.launcher_pid) << "\n" << top->text();
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_FALSE(running(job.pid));
  EXPECT_TRUE(audited(audit_lines(audit), job.pid, "SIGTERM"));
  // The status line says runuser stopped with its child and was continued.
  EXPECT_TRUE(top->wait_for("resumed runuser (PID " + std::to_string(job.launcher_pid) + ")", 3000)) << top->text();
  quit(*top);
}

TEST_F(TopScreen, AProtectedProcessIsRefusedWithTheReasonAndNothingIsSignalled) {
  SimHost host;
  auto smi = host.start_program(host.sim_binary_named("nvidia-smi"), {"--alloc", "0:1GiB"});
  auto top = start_top(host);
  ASSERT_TRUE(top->wait_for(" " + std::to_string(smi.pid) + " ")) << top->text();
  // Marked before anything is asked: this row cannot be ended from here.
  EXPECT_NE(row_of(top->text(), smi.pid).find("✗"), std::string::npos) << top->text();
  select_pid(*top, smi.pid);
  top->keys({"K"});
  ASSERT_TRUE(top->wait_for("Nothing here can be signalled")) << top->text();
  const std::string screen = top->text();
  EXPECT_NE(screen.find("Refused: nothing will be sent to them (1):"), std::string::npos) << screen;
  EXPECT_NE(screen.find("refused: protected process"), std::string::npos) << screen;
  top->keys({"Enter"});  // no ladder can be chosen
  ASSERT_TRUE(top->wait_for("nothing in this plan can be signalled")) << top->text();
  top->keys({"Escape"});
  ASSERT_TRUE(top->wait_for("cancelled: nothing was signalled")) << top->text();
  EXPECT_TRUE(running(smi.pid));
  quit(*top);
}

TEST_F(TopScreen, AForeignDriverPidIsRefusedFromInsideAPidNamespace) {
  if (!running_as_root() || !can_unshare_pid()) GTEST_SKIP() << "needs root and unshare(CLONE_NEWPID)";
  SimHost host;
  auto job = host.start({"--alloc", "0:2GiB"});
  auto top = start_top(host, {}, {}, 120, 40, {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc"});
  ASSERT_TRUE(top->wait_for("[foreign]")) << top->text();
  EXPECT_NE(row_of(top->text(), job.pid).find("2.0 GiB"), std::string::npos) << top->text();
  select_pid(*top, job.pid);
  top->keys({"K"});
  ASSERT_TRUE(top->wait_for("Nothing here can be signalled")) << top->text();
  EXPECT_NE(top->text().find("refused: identity foreign"), std::string::npos) << top->text();
  top->keys({"Escape"});
  EXPECT_TRUE(running(job.pid));
  quit(*top);
}

TEST_F(TopScreen, ReadonlyRefusesToEndAnything) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  auto top = start_top(host, {"--readonly"});
  ASSERT_TRUE(top->wait_for("read-only (--readonly)")) << top->text();
  ASSERT_TRUE(top->wait_for(" " + std::to_string(job.pid) + " ")) << top->text();
  select_pid(*top, job.pid);
  top->keys({"Space", "K"});
  ASSERT_TRUE(top->wait_for("read-only view (--readonly): nothing can be signalled")) << top->text();
  EXPECT_EQ(top->text().find("Will be signalled"), std::string::npos);
  EXPECT_TRUE(running(job.pid));
  quit(*top);
}

TEST_F(TopScreen, ANonRootUserIsToldWhichRowsAreNotTheirsToEnd) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: a second user";
  const passwd* user = test_user();
  ASSERT_NE(user, nullptr);
  SimHost host;
  auto roots = host.start({"--alloc", "0:1GiB"});
  auto theirs = host.start({"--alloc", "0:2GiB"}, user->pw_uid);
  const std::string uid = std::to_string(user->pw_uid);
  auto top = start_top(host, {}, {}, 120, 40, {"/usr/bin/setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups"});
  ASSERT_TRUE(top->wait_until([&](const std::string& s) { return shows_row(s, roots.pid) && shows_row(s, theirs.pid); }))
      << top->text();
  const std::string screen = top->text();
  EXPECT_NE(screen.find("not root: rows marked ✗ are not yours to end"), std::string::npos) << screen;
  EXPECT_NE(row_of(screen, roots.pid).find("✗"), std::string::npos) << screen;
  EXPECT_EQ(row_of(screen, theirs.pid).find("✗"), std::string::npos) << screen;
  select_pid(*top, roots.pid);
  top->keys({"K"});
  ASSERT_TRUE(top->wait_for("not permitted: permission denied")) << top->text();
  top->keys({"Escape"});
  EXPECT_TRUE(running(roots.pid));
  quit(*top);
}

TEST_F(TopScreen, ResizedTo80x24TheLayoutStaysReadable) {
  SimHost host({"--gpus", "2"});
  auto job = host.start({"--alloc", "0:4GiB", "--workers", "2"});
  auto other = host.start({"--alloc", "1:1GiB"});
  auto top = start_top(host);
  ASSERT_TRUE(top->wait_for(" " + std::to_string(job.pid) + " ")) << top->text();
  top->resize(80, 24);
  // A whole frame at the new size: a capture taken while ncurses repaints after the resize
  // can hold a cleared screen with only some of its lines drawn.
  ASSERT_TRUE(top->wait_until([&](const std::string& s) {
    return s.find("HOST MEM") == std::string::npos && s.rfind("gpureap top", 0) == 0 &&
           s.find(" " + std::to_string(other.pid) + " ") != std::string::npos && s.find("K end") != std::string::npos;
  })) << "the layout did not follow the resize:\n" << top->text();
  const auto lines = top->lines();
  ASSERT_EQ(lines.size(), 24u) << top->text();
  for (const auto& line : lines) EXPECT_LE(display_width(line), 80u) << line;
  EXPECT_EQ(lines[0].rfind("gpureap top", 0), 0u) << top->text();
  const std::string screen = top->text();
  EXPECT_NE(line_with(screen, "GPU 0 NVIDIA").find("4.0 GiB/80.0 GiB"), std::string::npos) << screen;
  EXPECT_NE(line_with(screen, "GPU 1 NVIDIA").find("1.0 GiB/80.0 GiB"), std::string::npos) << screen;
  const std::string heading = line_with(screen, "COMMAND");
  for (const char* column : {"GPU", "PID", "USER", "GPU MEM", "CPU%"}) {
    EXPECT_NE(heading.find(column), std::string::npos) << column << " lost at 80 columns: " << heading;
  }
  EXPECT_NE(row_of(screen, job.pid).find("4.0 GiB"), std::string::npos) << screen;
  EXPECT_NE(row_of(screen, other.pid).find("1.0 GiB"), std::string::npos) << screen;
  EXPECT_NE(lines[23].find("K end"), std::string::npos) << "the key line is not at the bottom:\n" << screen;
  quit(*top);
}

TEST_F(TopScreen, WithoutADriverItExplainsWhyAndStillListsTheHolders) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  auto top = start_top(host, {}, {{"GPUREAP_NVML_LIBRARY", host.state_dir() + "/no-such-libnvidia-ml.so.1"}});
  ASSERT_TRUE(top->wait_for("No GPU driver: ")) << top->text();
  ASSERT_TRUE(top->wait_for(" " + std::to_string(job.pid) + " ")) << top->text();
  EXPECT_NE(top->text().find("Processes holding GPU device files are still listed below."), std::string::npos);
  quit(*top);
}

TEST_F(TopScreen, AHostileCommandLineDoesNotDisturbTheScreen) {
  SimHost host;
  // Clear the screen, home the cursor, retitle the terminal, then a new line of its own.
  auto hostile = host.start({"--alloc", "0:1GiB", "--name", "\x1b[2J\x1b[H\x1b]0;pwned\x07" "evil\nforged row"});
  auto top = start_top(host);
  ASSERT_TRUE(top->wait_for(" " + std::to_string(hostile.pid) + " ")) << top->text();
  const auto lines = top->lines();
  const std::string screen = top->text();
  EXPECT_EQ(lines[0].rfind("gpureap top", 0), 0u) << screen;
  // Shown as inert text on its own row, which the rest of the screen keeps around it.
  EXPECT_NE(row_of(screen, hostile.pid).find("\\x1b[2J\\x1b[H\\x1b]0;pwned\\x07evil"), std::string::npos) << screen;
  for (const auto& line : lines) EXPECT_NE(line.rfind("forged", 0), 0u) << screen;
  EXPECT_EQ(line_with(screen, "pwned"), row_of(screen, hostile.pid)) << screen;
  EXPECT_NE(line_with(screen, "COMMAND"), "") << screen;
  EXPECT_NE(top->title(), "pwned");
  quit(*top);
}

// Without a terminal: one plain frame with --once, and one line for every usage error.
TEST(TopOnce, PrintsOneFrameForAPipeAndRefusesBadInputInOneLine) {
  SimHost host;
  auto job = host.start({"--alloc", "0:2GiB", "--workers", "1"});
  auto result = host.gpureap({"top", "--once"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(row_of(result.out, job.pid).find("2.0 GiB"), std::string::npos) << result.out;
  EXPECT_NE(row_of(result.out, job.workers[0]).find("[worker of " + std::to_string(job.pid) + "]"), std::string::npos)
      << result.out;
  EXPECT_EQ(result.out.find('\x1b'), std::string::npos) << "no escape sequence through a pipe";
  // Whole commands through a pipe, however long.
  EXPECT_NE(row_of(result.out, job.pid).find(std::string(GPUSIM_CUDA_BINARY) + " --alloc 0:2GiB --workers 1"),
            std::string::npos)
      << result.out;

  const auto no_driver = host.gpureap({"top", "--once"}, {{"GPUREAP_NVML_LIBRARY", host.state_dir() + "/none.so"}});
  EXPECT_EQ(no_driver.exit_code, 3) << no_driver.err;
  EXPECT_NE(no_driver.out.find("No GPU driver: "), std::string::npos) << no_driver.out;
  EXPECT_TRUE(shows_row(no_driver.out, job.pid)) << no_driver.out;

  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"top"}, "needs a terminal on stdin and stdout; use --once"},
      {{"top", "--interval", "nan"}, "--interval nan: not a duration"},
      {{"top", "--interval", "0.01"}, "--interval 0.01"},
      {{"top", "--sort", "size"}, "--sort size: sort by memory, cpu, age or pid"},
      {{"top", "--once", "--gpu", "7"}, "--gpu 7: no such GPU (this host has: 0, 1)"},
  };
  for (const auto& [args, says] : refused) {
    const auto r = host.gpureap(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.out << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_TRUE(running(job.pid));
}

}  // namespace
}  // namespace gpureap::test
