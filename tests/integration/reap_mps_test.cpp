// reap under MPS: one user's job (its MPS client and that user's server) is ended, the client
// through terminate_client and the server after it; another user's server and clients go on.
#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "mps_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(ReapMps, OneUsersJobEndsAndAnotherUsersClientsAndServerGoOn) {
  const passwd* user = test_user();
  if (user == nullptr) GTEST_SKIP() << "needs root to create " << kTestUserName;
  SimHost host({"--gpus", "1"});
  MpsDaemon mine(host, "mps-root");
  MpsDaemon theirs(host, "mps-user");
  ASSERT_TRUE(mine.running() && theirs.running()) << mine.error() << theirs.error();
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", mine.pipe());
  auto stays = host.start({"--alloc", "0:1GiB"});
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", theirs.pipe());
  auto job = host.start({"--alloc", "0:512MiB"}, user->pw_uid);
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", "");
  const pid_t root_server = mine.server(), user_server = theirs.server();
  ASSERT_GT(root_server, 1);
  ASSERT_GT(user_server, 1);

  std::string err;
  int rc = -1;
  const auto report = host.gpureap_json({"reap", "--user", kTestUserName, "--json"}, &rc, {}, &err);
  EXPECT_EQ(rc, 0) << err << report.dump(2);
  EXPECT_TRUE(eventually([&] { return !running(job.pid) && !running(user_server); })) << report.dump(2);
  EXPECT_NE(report.dump().find("terminate_client " + std::to_string(user_server) + " " + std::to_string(job.pid)),
            std::string::npos)
      << report.dump(2);
  EXPECT_TRUE(running(stays.pid));
  EXPECT_TRUE(running(root_server));
  EXPECT_EQ(mine.command("get_server_status " + std::to_string(root_server)), "ACTIVE");
  EXPECT_EQ(mine.command("get_client_list " + std::to_string(root_server)), std::to_string(stays.pid));
}

}  // namespace
}  // namespace gpureap::test
