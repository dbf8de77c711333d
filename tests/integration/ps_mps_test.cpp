// gpureap ps under MPS: two users' servers and clients, each client's memory under the client
// (and so its user), tied to its server through the kernel's socket table; the server's own
// memory apart; on a driver without the MPS list, the server alone.
#include <gtest/gtest.h>

#include "mps_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

class PsMps : public ::testing::TestWithParam<std::string> {};

TEST_P(PsMps, TwoUsersServersAndClientsEachWithTheirMemory) {
  const passwd* user = test_user();
  if (user == nullptr) GTEST_SKIP() << "needs root to create " << kTestUserName;
  SimHost host({"--gpus", "1"}, GetParam());
  MpsDaemon mine(host, "mps-root");
  MpsDaemon theirs(host, "mps-user");
  ASSERT_TRUE(mine.running() && theirs.running()) << mine.error() << theirs.error();
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", mine.pipe());
  auto a = host.start({"--alloc", "0:1GiB"});
  auto b = host.start({"--alloc", "0:512MiB"});
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", theirs.pipe());
  auto c = host.start({"--alloc", "0:256MiB"}, user->pw_uid);
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", "");
  const pid_t root_server = mine.server(), user_server = theirs.server();
  ASSERT_GT(root_server, 1);
  ASSERT_GT(user_server, 1);

  const auto ps = host.ps_json();
  const bool lists_clients = GetParam() != "r450";
  const auto* rs = find_process(ps, root_server, 0);
  const auto* us = find_process(ps, user_server, 0);
  ASSERT_NE(rs, nullptr) << ps.dump(2);
  ASSERT_NE(us, nullptr) << ps.dump(2);
  EXPECT_EQ((*rs)["type"], "C");
  EXPECT_EQ((*rs)["mps"]["role"], "server");
  EXPECT_EQ((*rs)["mps"]["control_daemon_pid"], mine.pid());
  EXPECT_EQ((*us)["user"], kTestUserName);
  EXPECT_EQ((*us)["mps"]["control_daemon_pid"], theirs.pid());
  if (!lists_clients) {
    // The driver shows each server alone, with everything its clients hold.
    EXPECT_EQ((*rs)["gpu_memory_bytes"], 64 * MiB + 1 * GiB + 512 * MiB);
    EXPECT_EQ((*us)["gpu_memory_bytes"], 64 * MiB + 256 * MiB);
    EXPECT_EQ(find_process(ps, a.pid, 0), nullptr);
    return;
  }
  // The server's own memory apart from its clients'.
  EXPECT_EQ((*rs)["gpu_memory_bytes"], 64 * MiB);
  EXPECT_EQ((*rs)["mps"]["clients"], 2);
  EXPECT_EQ((*us)["mps"]["clients"], 1);
  const struct {
    const SimProcess* process;
    unsigned long long bytes;
    pid_t server;
    std::string user;
  } clients[] = {{&a, 1 * GiB, root_server, "root"}, {&b, 512 * MiB, root_server, "root"},
                 {&c, 256 * MiB, user_server, kTestUserName}};
  for (const auto& expected : clients) {
    const auto* p = find_process(ps, expected.process->pid, 0);
    ASSERT_NE(p, nullptr) << ps.dump(2);
    EXPECT_EQ((*p)["type"], "M");
    EXPECT_EQ((*p)["gpu_memory_bytes"], expected.bytes);
    EXPECT_EQ((*p)["user"], expected.user);
    EXPECT_EQ((*p)["identity"], "ok") << (*p)["identity_reason"];
    EXPECT_EQ((*p)["mps"]["role"], "client");
    EXPECT_EQ((*p)["mps"]["server_pid"], expected.server);
  }
  const auto table = host.gpureap({"ps"});
  EXPECT_NE(table.out.find("[MPS client of " + std::to_string(root_server) + "]"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("[MPS server, 2 clients]"), std::string::npos) << table.out;
}

INSTANTIATE_TEST_SUITE_P(Generations, PsMps, ::testing::Values("r450", "r470", "r550"));

}  // namespace
}  // namespace gpureap::test
