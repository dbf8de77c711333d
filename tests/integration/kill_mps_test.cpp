// gpureap kill under MPS: a client is ended through terminate_client before any signal, so the
// server and its other clients keep working (the bystander); the server is never signalled as
// a side effect, and refused while clients it serves are left running.
#include <signal.h>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "mps_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

class KillMps : public ::testing::TestWithParam<std::string> {};

TEST_P(KillMps, AClientEndsThroughTerminateClientAndTheServerAndTheOtherClientGoOn) {
  SimHost host({"--gpus", "1"}, GetParam());
  MpsDaemon daemon(host, "mps");
  ASSERT_TRUE(daemon.running()) << daemon.error();
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", daemon.pipe());
  auto target = host.start({"--alloc", "0:1GiB"});
  auto bystander = host.start({"--alloc", "0:512MiB"});
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", "");
  const pid_t server = daemon.server();
  ASSERT_GT(server, 1);

  int rc = -1;
  const auto report = kill_json(host, {std::to_string(target.pid), "--yes"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(target.pid); }));
  // The memory came back with the server still running, and nobody else was touched.
  ASSERT_EQ(report["gpus"].size(), 1u) << report.dump(2);
  EXPECT_EQ(report["gpus"][0]["verified"], true) << report.dump(2);
  EXPECT_EQ(report["gpus"][0]["freed_bytes"], 1 * GiB) << report.dump(2);
  EXPECT_NE(report["notes"].dump().find("terminate_client " + std::to_string(server) + " " + std::to_string(target.pid)),
            std::string::npos)
      << report.dump(2);
  EXPECT_TRUE(running(server));
  EXPECT_TRUE(running(bystander.pid));
  EXPECT_EQ(daemon.command("get_server_status " + std::to_string(server)), "ACTIVE");
  EXPECT_EQ(daemon.command("get_client_list " + std::to_string(server)), std::to_string(bystander.pid));
  // What a bare signal would have done instead (the simulator, as NVIDIA documents it).
  ::kill(bystander.pid, SIGKILL);
  EXPECT_TRUE(eventually([&] { return daemon.command("get_client_list " + std::to_string(server)).empty(); }));
}

INSTANTIATE_TEST_SUITE_P(Generations, KillMps, ::testing::Values("r470", "r550"));

TEST(KillMpsClient, NotSignalledWhenItsServerIsNotProvenUnlessForced) {
  SimHost host({"--gpus", "1"});
  // Listed by the MPS call, but connected to no server the driver lists.
  auto client = host.start({"--alloc", "0:1GiB:M"});
  int rc = -1;
  auto report = kill_json(host, {std::to_string(client.pid), "--yes"}, &rc);
  EXPECT_NE(rc, 0) << report.dump(2);
  const auto* t = kill_target(report, client.pid);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["outcome"], "refused");
  EXPECT_NE((*t)["detail"].get<std::string>().find("its MPS server is not proven"), std::string::npos) << report.dump(2);
  EXPECT_TRUE(running(client.pid));
  report = kill_json(host, {std::to_string(client.pid), "--yes", "--force"}, &rc);
  EXPECT_EQ(rc, 0) << report.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(client.pid); }));
}

TEST(KillMpsServer, RefusedWhileItServesClientsLeftRunningAndNeverReachedThroughATree) {
  SimHost host({"--gpus", "1"});
  MpsDaemon daemon(host, "mps");
  ASSERT_TRUE(daemon.running()) << daemon.error();
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", daemon.pipe());
  auto client = host.start({"--alloc", "0:1GiB"});
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", "");
  const pid_t server = daemon.server();
  int rc = -1;
  auto report = kill_json(host, {std::to_string(server), "--yes"}, &rc);
  EXPECT_EQ(rc, 8) << report.dump(2);
  const auto* t = kill_target(report, server);
  ASSERT_NE(t, nullptr) << report.dump(2);
  EXPECT_EQ((*t)["refusal"]["kind"], "mps-server");
  EXPECT_NE((*t)["refusal"]["message"].get<std::string>().find(std::to_string(client.pid)), std::string::npos);
  EXPECT_TRUE(running(server));
  EXPECT_TRUE(running(client.pid));
  // The control daemon's tree holds the server: selecting the daemon never reaches it.
  report = kill_json(host, {std::to_string(daemon.pid()), "--yes"}, &rc);
  EXPECT_TRUE(running(server)) << report.dump(2);
  EXPECT_TRUE(running(client.pid));
  EXPECT_EQ(daemon.command("get_server_status " + std::to_string(server)), "");  // the daemon is gone
}

}  // namespace
}  // namespace gpureap::test
