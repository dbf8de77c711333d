// MPS as a hostile user would try it. Roles come from kernel facts alone (a socket of root's
// listening at <pipe>/control, a server its child, a client tied by the exact socket pair): a
// process posing as a control daemon (a symlink named nvidia-cuda-mps-control to a file of
// root's, a pid file of mode 0666, a socket of its own) gains nothing and has nothing of it run;
// a name buys no protection; a planted pipe directory raises nothing; and an MPS client whose
// terminate_client failed is never signalled, however the command reached it. Each with a
// bystander that survives.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "doctor_support.hpp"
#include "kill_support.hpp"
#include "mps_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

// A directory of the test user's, as the attacker makes one: owned by them, mode 0755.
std::string user_directory(const SimHost& host, const std::string& name, uid_t uid, gid_t gid) {
  const std::string dir = host.state_dir() + "/" + name;
  std::filesystem::create_directories(dir);
  EXPECT_EQ(::chown(dir.c_str(), uid, gid), 0);
  EXPECT_EQ(::chmod(dir.c_str(), 0755), 0);
  return dir;
}

// Its parent's PID, from /proc/<pid>/stat (0 when gone).
pid_t parent_of(pid_t pid) {
  const std::string stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 4 >= stat.size()) return 0;
  return std::atoi(stat.c_str() + paren + 4);
}

// The attacker's control daemon: a symlink named nvidia-cuda-mps-control in `dir` to
// fake-mps-parent (a file of root's that is no MPS program), run by the user, listening at
// <dir>/control with a 0666 pid file, the parent of a 1 GiB hog and of a process the driver
// lists as an MPS client; the two hold the two ends of one socket pair.
struct FakeDaemon {
  std::string dir;
  SimProcess process;  // its READY line is the hog's
  pid_t daemon = -1;
  pid_t hog = -1;
  pid_t client = -1;
};

FakeDaemon start_fake_daemon(const SimHost& host, const passwd& user, const std::string& name) {
  FakeDaemon fake;
  fake.dir = user_directory(host, name, user.pw_uid, user.pw_gid);
  const std::string link = fake.dir + "/nvidia-cuda-mps-control";
  EXPECT_EQ(::symlink(reachable_by_other_users(FAKE_MPS_PARENT_BINARY).c_str(), link.c_str()), 0);
  const std::string cuda = reachable_by_other_users(GPUSIM_CUDA_BINARY);
  fake.process = host.start_program(link,
                                    {"--listen", fake.dir, "--socketpair", "--", cuda, "--alloc", "0:1GiB", "--", cuda,
                                     "--alloc", "0:256MiB:M"},
                                    user.pw_uid);
  fake.hog = std::atoi(ready_field(fake.process, "pid").c_str());
  fake.daemon = parent_of(fake.hog);
  // The client is the one the driver lists as an MPS client of this user.
  EXPECT_TRUE(eventually([&] {
    const auto now = host.ps_json();
    for (const auto& p : now.value("processes", nlohmann::json::array())) {
      if (p["type"] == "M" && p["user"] == kTestUserName) fake.client = p["pid"].get<pid_t>();
    }
    return fake.client > 1;
  }));
  return fake;
}

bool ran(const FakeDaemon& fake) { return std::filesystem::exists(fake.dir + "/executed"); }

bool any_signal_audited(const std::vector<nlohmann::json>& lines, pid_t pid) {
  for (const auto& l : lines) {
    if (l.value("pid", 0) == pid && l.value("stage", "") == "sent") return true;
  }
  return false;
}

TEST(MpsHostile, AFakeControlDaemonProvesNothingAndNothingOfItIsRun) {
  const passwd* user = test_user();
  if (user == nullptr) GTEST_SKIP() << "needs root to create " << kTestUserName;
  SimHost host({"--gpus", "1"});
  auto bystander = host.start({"--alloc", "0:512MiB"});
  auto fake = start_fake_daemon(host, *user, "fake-mps");
  ASSERT_GT(fake.hog, 1);
  ASSERT_GT(fake.daemon, 1);
  ASSERT_GT(fake.client, 1);

  // No role: the hog is an ordinary holder, the client tied to no server.
  const auto ps = host.ps_json();
  const auto* hog = find_process(ps, fake.hog, 0);
  const auto* client = find_process(ps, fake.client, 0);
  ASSERT_NE(hog, nullptr) << ps.dump(2);
  ASSERT_NE(client, nullptr) << ps.dump(2);
  EXPECT_TRUE((*hog)["mps"].is_null()) << ps.dump(2);
  EXPECT_EQ((*client)["mps"]["role"], "client");
  EXPECT_TRUE((*client)["mps"]["server_pid"].is_null()) << ps.dump(2);
  EXPECT_EQ(host.gpureap({"ps"}).out.find("MPS server"), std::string::npos);

  // Diagnosis, with root's environment pointing at the attacker's directory: nothing said of
  // it, nothing run, and it answers at once although the fake daemon is stopped.
  ASSERT_EQ(::kill(fake.daemon, SIGSTOP), 0);
  int rc = -1;
  const auto report = doctor_json(host, {}, &rc, {{"CUDA_MPS_PIPE_DIRECTORY", fake.dir}});
  EXPECT_EQ(report.dump().find(fake.dir), std::string::npos) << report.dump(2);
  const auto scrape = host.gpureap({"export", "--once", "--no-kernel-log"});
  EXPECT_EQ(scrape.exit_code, 0) << scrape.err;
  ASSERT_EQ(::kill(fake.daemon, SIGCONT), 0);

  // The client: its server is not proven, so it is not signalled (and nothing is run for it).
  auto killed = kill_json(host, {std::to_string(fake.client), "--yes"}, &rc);
  EXPECT_NE(rc, 0) << killed.dump(2);
  const auto* t = kill_target(killed, fake.client);
  ASSERT_NE(t, nullptr) << killed.dump(2);
  EXPECT_EQ((*t)["outcome"], "refused") << killed.dump(2);
  EXPECT_NE((*t)["detail"].get<std::string>().find("not signalled"), std::string::npos) << killed.dump(2);
  EXPECT_TRUE(running(fake.client));

  // The hog: no protection, ended like any holder, its memory verified free.
  killed = kill_json(host, {std::to_string(fake.hog), "--yes"}, &rc);
  EXPECT_EQ(rc, 0) << killed.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(fake.hog); }));
  t = kill_target(killed, fake.hog);
  ASSERT_NE(t, nullptr) << killed.dump(2);
  EXPECT_TRUE((*t)["refusal"].is_null()) << killed.dump(2);
  EXPECT_TRUE(running(bystander.pid));
  EXPECT_TRUE(running(fake.client));

  // The user's job reaped: the client is still not signalled, and nothing of the fake is run.
  const auto reaped = host.gpureap_json(
      {"reap", "--user", kTestUserName, "--kill-timeout", "1", "--verify-timeout", "0", "--json"}, &rc);
  EXPECT_NE(rc, 0) << reaped.dump(2);
  EXPECT_NE(reaped.dump().find("not signalled"), std::string::npos) << reaped.dump(2);
  EXPECT_TRUE(running(fake.client));
  EXPECT_TRUE(running(bystander.pid));
  EXPECT_FALSE(ran(fake)) << read_text_file(fake.dir + "/executed");
}

TEST(MpsHostile, AProcessNamedLikeAnMpsServerGainsNothing) {
  const passwd* user = test_user();
  if (user == nullptr) GTEST_SKIP() << "needs root to create " << kTestUserName;
  SimHost host({"--gpus", "1"});
  auto bystander = host.start({"--alloc", "0:512MiB"});
  const std::string named = host.sim_binary_named("nvidia-cuda-mps-server");
  const std::string cuda = reachable_by_other_users(GPUSIM_CUDA_BINARY);
  // A launcher holding 256 MiB, and beside it in its process group a child named like a server.
  auto launcher = host.start_program(reachable_by_other_users(FAKE_MPS_PARENT_BINARY),
                                     {"--", cuda, "--alloc", "0:256MiB", "--", named, "--alloc", "0:1GiB"},
                                     user->pw_uid);
  pid_t server_named = -1;
  ASSERT_TRUE(eventually([&] {
    const auto now = host.ps_json();
    for (const auto& p : now.value("processes", nlohmann::json::array())) {
      if (p["gpu_memory_bytes"] == 1 * GiB) server_named = p["pid"].get<pid_t>();
    }
    return server_named > 1;
  }));
  const pid_t first = std::atoi(ready_field(launcher, "pid").c_str());
  ASSERT_GT(first, 1);
  const auto ps = host.ps_json();
  EXPECT_TRUE((*find_process(ps, server_named, 0))["mps"].is_null()) << ps.dump(2);

  int rc = -1;
  const auto report = kill_json(host, {std::to_string(first), "--group", "--yes"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  const auto* t = kill_target(report, server_named);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_TRUE((*t)["refusal"].is_null()) << report.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(server_named) && !running(first); }));
  EXPECT_TRUE(running(bystander.pid));
}

// A socket file left at <dir>/control, as a killed daemon leaves it.
void leave_control_socket(const std::string& dir) {
  const std::string path = dir + "/control";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << std::strerror(errno);
  ::close(fd);
}

TEST(MpsHostile, APlantedPipeDirectoryRaisesNothingAndAdvisesNothing) {
  const passwd* user = test_user();
  if (user == nullptr) GTEST_SKIP() << "needs root to create " << kTestUserName;
  SimHost host({"--gpus", "1"});
  // What the attack planted: a directory anyone can write, a control socket nobody listens on
  // and the pid file of a process that is gone.
  const std::string planted = user_directory(host, "nvidia-mps", user->pw_uid, user->pw_gid);
  ASSERT_EQ(::chmod(planted.c_str(), 0777), 0);
  leave_control_socket(planted);
  {
    auto gone = host.start({"--exit-after", "1"});
    gone.wait_exit();
    std::ofstream(planted + "/nvidia-cuda-mps-control.pid") << gone.pid << "\n";
  }
  int rc = -1;
  auto report = doctor_json(host, {}, &rc, {{"CUDA_MPS_PIPE_DIRECTORY", planted}});
  EXPECT_TRUE(findings(report, "mps-stale-pipe-directory").empty()) << report.dump(2);
  EXPECT_EQ(report.dump().find(planted), std::string::npos) << report.dump(2);

  // The same files in a directory of root's that only root can write: a dead daemon's.
  ASSERT_EQ(::chown(planted.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(planted.c_str(), 0755), 0);
  report = doctor_json(host, {}, &rc, {{"CUDA_MPS_PIPE_DIRECTORY", planted}});
  const auto stale = findings(report, "mps-stale-pipe-directory");
  ASSERT_EQ(stale.size(), 1u) << report.dump(2);
  EXPECT_EQ(stale[0]["evidence"]["pipe_directory"], planted);
  EXPECT_TRUE(has_remedy(stale[0], "rm " + planted + "/control")) << stale[0].dump(2);
}

class MpsFailedTerminate : public ::testing::TestWithParam<std::string> {};

// The client's server is stopped, so terminate_client cannot end its work within the timeout:
// reached through its launcher's tree, its process group or its user, it is never signalled,
// the report says so, and the exit status says it was not all ended.
TEST_P(MpsFailedTerminate, IsNeverFollowedByASignal) {
  const passwd* user = test_user();
  if (user == nullptr) GTEST_SKIP() << "needs root to create " << kTestUserName;
  SimHost host({"--gpus", "1"});
  MpsDaemon daemon(host, "mps");
  ASSERT_TRUE(daemon.running()) << daemon.error();
  auto bystander = host.start({"--alloc", "0:512MiB"});
  const std::string cuda = reachable_by_other_users(GPUSIM_CUDA_BINARY);
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", daemon.pipe());
  // The launcher (its tree and group): a 256 MiB hog outside MPS, and an MPS client.
  auto launcher = host.start_program(reachable_by_other_users(FAKE_MPS_PARENT_BINARY),
                                     {"--", "/usr/bin/env", "-u", "CUDA_MPS_PIPE_DIRECTORY", cuda, "--alloc",
                                      "0:256MiB", "--", cuda, "--alloc", "0:1GiB", "--mps-on-terminate", "stay"},
                                     user->pw_uid);
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", "");
  const pid_t hog = std::atoi(ready_field(launcher, "pid").c_str());
  pid_t client = -1;
  ASSERT_TRUE(eventually([&] {
    const auto now = host.ps_json();
    for (const auto& p : now.value("processes", nlohmann::json::array())) {
      if (p["type"] == "M" && !p["mps"].is_null() && !p["mps"]["server_pid"].is_null()) client = p["pid"].get<pid_t>();
    }
    return client > 1;
  }));
  const pid_t server = daemon.server();
  ASSERT_GT(server, 1);
  ASSERT_EQ(::kill(server, SIGSTOP), 0);

  std::vector<std::string> args;
  if (GetParam() == "tree") args = {std::to_string(parent_of(hog))};  // the launcher, with its descendants
  if (GetParam() == "group") args = {std::to_string(hog), "--group"};
  if (GetParam() == "user") args = {"--user", kTestUserName};
  const std::string log = host.state_dir() + "/audit.log";
  args.insert(args.end(), {"--yes", "--timeout", "2", "--audit-log", log});
  int rc = -1;
  const auto report = kill_json(host, args, &rc);
  EXPECT_NE(rc, 0) << report.dump(2);
  const auto* t = kill_target(report, client);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["outcome"], "refused") << report.dump(2);
  EXPECT_TRUE((*t)["signals"].empty()) << report.dump(2);
  EXPECT_NE((*t)["detail"].get<std::string>().find("not signalled"), std::string::npos) << report.dump(2);
  EXPECT_FALSE(any_signal_audited(audit_lines(log), client)) << read_text_file(log);
  EXPECT_TRUE(running(client));
  EXPECT_NE(process_state(client), 'T');
  EXPECT_TRUE(eventually([&] { return !running(hog); })) << report.dump(2);
  EXPECT_TRUE(running(bystander.pid));
  EXPECT_TRUE(running(server));
  ::kill(server, SIGCONT);
}

INSTANTIATE_TEST_SUITE_P(Reach, MpsFailedTerminate, ::testing::Values("tree", "group", "user"));

}  // namespace
}  // namespace gpureap::test
