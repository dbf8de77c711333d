// doctor under MPS: an idle server holding memory, a server a client's death left faulted
// (what to do, safest first), and a pipe directory that outlived its control daemon.
#include <signal.h>

#include <gtest/gtest.h>

#include "doctor_support.hpp"
#include "kill_support.hpp"
#include "mps_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(DoctorMps, IdleServerFaultedServerAndStalePipeDirectory) {
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

  auto victim = host.start({"--alloc", "0:1GiB"});
  auto hung = host.start({"--alloc", "0:1GiB"});
  ::kill(victim.pid, SIGKILL);  // a bare signal with work outstanding
  ASSERT_TRUE(eventually([&] { return daemon.command("get_server_status " + std::to_string(server)) == "FAULT"; }));
  report = doctor_json(host, {}, &rc);
  EXPECT_EQ(rc, 2) << report.dump(2);
  auto fault = findings(report, "mps-server-fault", 0);
  ASSERT_EQ(fault.size(), 1u) << report.dump(2);
  EXPECT_EQ(fault[0]["severity"], "critical");
  EXPECT_EQ(fault[0]["evidence"]["clients"], nlohmann::json::array({hung.pid}));
  ASSERT_GE(fault[0]["remedies"].size(), 3u);
  EXPECT_EQ(fault[0]["remedies"][0]["risk"], "none");
  EXPECT_EQ(fault[0]["remedies"][1]["command"], "gpureap kill " + std::to_string(hung.pid));
  EXPECT_EQ(fault[0]["remedies"][2]["risk"], "high");
  EXPECT_TRUE(findings(report, "mps-server-idle").empty());

  daemon.kill_hard();
  report = doctor_json(host, {}, &rc);
  auto stale = findings(report, "mps-stale-pipe-directory");
  ASSERT_EQ(stale.size(), 1u) << report.dump(2);
  EXPECT_EQ(stale[0]["evidence"]["pipe_directory"], daemon.pipe());
  EXPECT_EQ(stale[0]["evidence"]["daemon_pid"], daemon.pid());
}

}  // namespace
}  // namespace gpureap::test
