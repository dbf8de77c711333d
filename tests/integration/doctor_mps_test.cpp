// doctor under MPS: an idle server holding memory, a client of another user waiting for the
// server's clients to be done, and a pipe directory that outlived its control daemon.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "doctor_support.hpp"
#include "kill_support.hpp"
#include "mps_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(DoctorMps, IdleServerAndStalePipeDirectory) {
  SimHost host({"--gpus", "1"});
  MpsDaemon daemon(host, "mps");
  ASSERT_TRUE(daemon.running()) << daemon.error();
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", daemon.pipe());
  {
    auto done = host.start({"--alloc", "0:1GiB", "--exit-after", "50"});
    done.wait_exit();
  }
  const pid_t server = daemon.server();
  ASSERT_GT(server, 1);
  int rc = -1;
  auto report = doctor_json(host, {}, &rc);
  auto idle = findings(report, "mps-server-idle", 0);
  ASSERT_EQ(idle.size(), 1u) << report.dump(2);
  EXPECT_EQ(idle[0]["evidence"]["server_pid"], server);
  EXPECT_TRUE(findings(report, "mps-stale-pipe-directory").empty()) << report.dump(2);

  daemon.kill_hard();
  report = doctor_json(host, {}, &rc);
  auto stale = findings(report, "mps-stale-pipe-directory");
  ASSERT_EQ(stale.size(), 1u) << report.dump(2);
  EXPECT_EQ(stale[0]["evidence"]["pipe_directory"], daemon.pipe());
  EXPECT_TRUE(has_remedy(stale[0], "rm " + daemon.pipe() + "/control")) << stale[0].dump(2);
}

// gpusim-cuda started as `uid` without waiting for its READY: a client of another user than
// the server's blocks in cuInit, its connection queued by the control daemon.
class WaitingClient {
 public:
  WaitingClient(const SimHost& host, uid_t uid, const std::vector<std::string>& args) {
    std::vector<std::string> argv{GPUSIM_CUDA_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    SpawnOptions options;
    options.env = host.env();
    options.uid = uid;
    const PreparedExec exec(argv, options);  // no allocation after fork()
    pid_ = fork();
    if (pid_ == 0) {
      const int null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, STDOUT_FILENO);
      exec.exec_in_child(false);
    }
  }
  ~WaitingClient() {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  WaitingClient(const WaitingClient&) = delete;
  WaitingClient& operator=(const WaitingClient&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

TEST(DoctorMps, AClientOfAnotherUserWaitingForTheServersClientsIsReportedAndNothingIsSignalled) {
  const passwd* user = test_user();
  if (user == nullptr) GTEST_SKIP() << "needs root to create " << kTestUserName;
  SimHost host({"--gpus", "1"});
  MpsDaemon daemon(host, "mps");
  ASSERT_TRUE(daemon.running()) << daemon.error();
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", daemon.pipe());
  auto client = host.start({"--alloc", "0:1GiB"});
  const pid_t server = daemon.server();
  ASSERT_GT(server, 1);
  WaitingClient waiting(host, user->pw_uid, {"--alloc", "0:256MiB"});
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", "");
  const std::string waits = "Client " + std::to_string(waiting.pid()) + " (uid " + std::to_string(user->pw_uid) + ") waits";
  ASSERT_TRUE(eventually([&] { return read_text_file(daemon.log() + "/control.log").find(waits) != std::string::npos; }))
      << read_text_file(daemon.log() + "/control.log");

  int rc = -1;
  auto report = doctor_json(host, {}, &rc);
  auto found = findings(report, "mps-client-waiting", 0);
  ASSERT_EQ(found.size(), 1u) << report.dump(2);
  const auto& f = found[0];
  EXPECT_EQ(f["severity"], "warning");
  EXPECT_EQ(f["evidence"]["server_pid"], server);
  EXPECT_EQ(f["evidence"]["server_user"], "root");
  EXPECT_EQ(f["evidence"]["server_uid"], 0);
  EXPECT_EQ(f["evidence"]["control_daemon_pid"], daemon.pid());
  EXPECT_EQ(f["evidence"]["server_clients"], nlohmann::json::array({client.pid}));
  ASSERT_EQ(f["evidence"]["waiting"].size(), 1u) << f.dump(2);
  EXPECT_EQ(f["evidence"]["waiting"][0]["pid"], waiting.pid());
  EXPECT_EQ(f["evidence"]["waiting"][0]["user"], kTestUserName);
  EXPECT_EQ(f["evidence"]["waiting"][0]["uid"], user->pw_uid);
  EXPECT_NE(f["summary"].get<std::string>().find(kTestUserName), std::string::npos) << f.dump(2);
  ASSERT_GE(f["remedies"].size(), 4u) << f.dump(2);
  EXPECT_EQ(f["remedies"][0]["risk"], "none");
  EXPECT_EQ(f["remedies"][2]["command"], "gpureap kill " + std::to_string(waiting.pid()));
  EXPECT_EQ(f["remedies"][3]["command"], "gpureap kill " + std::to_string(client.pid));
  // Nothing was signalled: everybody is where they were.
  EXPECT_TRUE(running(waiting.pid()));
  EXPECT_TRUE(running(client.pid));
  EXPECT_TRUE(running(server));
  EXPECT_EQ(daemon.command("get_server_status " + std::to_string(server)), "ACTIVE");
  EXPECT_EQ(daemon.command("get_client_list " + std::to_string(server)), std::to_string(client.pid));

  // Once root's client is done the waiting one gets a server of its own user, and the finding goes.
  EXPECT_EQ(daemon.command("terminate_client " + std::to_string(server) + " " + std::to_string(client.pid)), "");
  ASSERT_TRUE(eventually([&] {
    const pid_t now = daemon.server();
    return now > 1 && now != server &&
           daemon.command("get_client_list " + std::to_string(now)) == std::to_string(waiting.pid());
  }));
  report = doctor_json(host, {}, &rc);
  EXPECT_TRUE(findings(report, "mps-client-waiting").empty()) << report.dump(2);
}

}  // namespace
}  // namespace gpureap::test
