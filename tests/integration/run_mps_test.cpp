// gpureap run under MPS: a job whose leftover is an MPS client on a server it shares with
// another job's client. The leftover is ended through terminate_client before any signal, so
// the server and the other job's client keep working (the bystander); the server is never
// signalled, and the job's memory comes back.
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include <gtest/gtest.h>

#include "mps_support.hpp"
#include "run_support.hpp"

namespace gpureap::test {
namespace {

// The PIDs the audit log names.
std::set<pid_t> audited_pids(const std::string& file) {
  std::set<pid_t> pids;
  std::ifstream log(file);
  for (std::string line; std::getline(log, line);) pids.insert(nlohmann::json::parse(line)["pid"].get<pid_t>());
  return pids;
}

class RunJobMps : public ::testing::TestWithParam<std::string> {};

TEST_P(RunJobMps, ALeftoverClientEndsThroughTerminateClientAndAnotherJobsClientAndTheServerGoOn) {
  SimHost host({"--gpus", "1"}, GetParam());
  MpsDaemon daemon(host, "mps");
  ASSERT_TRUE(daemon.running()) << daemon.error();
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", daemon.pipe());
  // The bystander: another job's client on the same server, running until the test ends.
  BackgroundRun other(host, {"--poll-interval", "100ms"}, {"/bin/sh", "-c", "exec \"$SIM\" --alloc 0:512MiB"});
  const auto bystander = other.sim_ready();
  ASSERT_EQ(bystander.size(), 1u);
  const pid_t server = daemon.server();
  ASSERT_GT(server, 1);

  // The job's main command exits and leaves its MPS client running.
  const std::string audit = host.state_dir() + "/audit.log";
  BackgroundRun job(host, {"--poll-interval", "100ms", "--kill-timeout", "2", "--audit-log", audit},
                    {"/bin/sh", "-c", "\"$SIM\" --alloc 0:1GiB & sleep 1.5"});
  const auto client = job.sim_ready();
  ASSERT_EQ(client.size(), 1u);
  EXPECT_EQ(daemon.command("get_client_list " + std::to_string(server)),
            std::to_string(bystander[0]) + "\n" + std::to_string(client[0]));
  EXPECT_EQ(job.wait(), 0) << job.stderr_text();
  const auto report = job.report();

  // The client's work was ended through its control daemon, and the client is gone.
  EXPECT_NE(report["notes"].dump().find("terminate_client " + std::to_string(server) + " " + std::to_string(client[0])),
            std::string::npos)
      << report.dump(2);
  if (const auto* e = ended_entry(report, client[0])) {
    EXPECT_NE((*e)["outcome"], "survived") << report.dump(2);
  }
  EXPECT_FALSE(running(client[0]));
  expect_memory_verified(report);

  // The server was never signalled and still serves the other job's client, which holds its memory.
  const auto audited = audited_pids(audit);
  EXPECT_EQ(audited.count(server), 0u);
  EXPECT_EQ(audited.count(bystander[0]), 0u);
  EXPECT_TRUE(running(server));
  EXPECT_TRUE(running(bystander[0]));
  EXPECT_EQ(daemon.command("get_server_status " + std::to_string(server)), "ACTIVE");
  EXPECT_EQ(daemon.command("get_client_list " + std::to_string(server)), std::to_string(bystander[0]));
  const auto ps = host.ps_json();
  const auto* still = find_process(ps, bystander[0], 0);
  ASSERT_NE(still, nullptr) << ps.dump(2);
  EXPECT_EQ((*still)["gpu_memory_bytes"], 512 * MiB) << ps.dump(2);
  EXPECT_EQ((*still)["mps"]["role"], "client");
  EXPECT_EQ(find_process(ps, client[0], 0), nullptr) << ps.dump(2);
}

INSTANTIATE_TEST_SUITE_P(Generations, RunJobMps, ::testing::Values("r470", "r550"));

// A job that starts its own MPS control daemon, whose server another job's client then uses: the
// daemon and the server are the job's leftovers, yet ending them would end the other job's GPU
// work. Both are left running and reported, never signalled; the other job's client goes on.
TEST(RunJobMpsDaemon, ADaemonTheJobStartedThatServesAnotherJobsClientIsLeftRunningAndReported) {
  SimHost host({"--gpus", "1"});
  const RootDirectory root;
  const std::string dir = root.path() + "/job-mps";
  std::filesystem::create_directories(dir + "/pipe");
  std::filesystem::create_directories(dir + "/log");
  host.set_env("CUDA_MPS_PIPE_DIRECTORY", dir + "/pipe");
  host.set_env("CUDA_MPS_LOG_DIRECTORY", dir + "/log");
  int commands = 0;
  auto control = [&](const std::string& line) {
    const std::string input = dir + "/command-" + std::to_string(commands++);
    std::ofstream(input) << line << "\n";
    SpawnOptions o;
    o.env = host.env();
    o.stdin_path = input;
    std::string out = run_command({std::string(GPUSIM_BIN_DIR) + "/nvidia-cuda-mps-control"}, o).out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  };
  const std::string audit = host.state_dir() + "/audit.log";
  BackgroundRun job(host, {"--poll-interval", "100ms", "--kill-timeout", "1", "--verify-timeout", "0", "--audit-log", audit},
                    {"/bin/sh", "-c", "\"$0\" -d && sleep 2", std::string(GPUSIM_BIN_DIR) + "/nvidia-cuda-mps-control"});
  const std::string pid_file = dir + "/pipe/nvidia-cuda-mps-control.pid";
  ASSERT_TRUE(eventually([&] { return std::atoi(read_text_file(pid_file).c_str()) > 1; }, 5000)) << job.stderr_text();
  const pid_t daemon = std::atoi(read_text_file(pid_file).c_str());
  // Quit at the end whatever happened: the daemon outlives the job by design here.
  struct Quit {
    std::function<std::string(const std::string&)> send;
    ~Quit() { send("quit"); }
  } quit{control};

  BackgroundRun other(host, {"--poll-interval", "100ms"}, {"/bin/sh", "-c", "exec \"$SIM\" --alloc 0:512MiB"});
  const auto bystander = other.sim_ready();
  ASSERT_EQ(bystander.size(), 1u);
  const pid_t server = std::atoi(control("get_server_list").c_str());
  ASSERT_GT(server, 1);

  EXPECT_EQ(job.wait(), 123) << job.stderr_text();
  const auto report = job.report();
  for (pid_t pid : {daemon, server}) {
    const auto* e = ended_entry(report, pid);
    ASSERT_NE(e, nullptr) << pid << "\n" << report.dump(2);
    EXPECT_EQ((*e)["outcome"], "survived") << report.dump(2);
    EXPECT_NE((*e)["detail"].get<std::string>().find("serves clients outside the job: " + std::to_string(bystander[0])),
              std::string::npos)
        << report.dump(2);
    EXPECT_TRUE(running(pid)) << pid;
  }
  const auto audited = audited_pids(audit);
  for (pid_t pid : {daemon, server, bystander[0]}) EXPECT_EQ(audited.count(pid), 0u) << pid;
  EXPECT_TRUE(running(bystander[0]));
  EXPECT_EQ(control("get_server_status " + std::to_string(server)), "ACTIVE");
  EXPECT_EQ(control("get_client_list " + std::to_string(server)), std::to_string(bystander[0]));
  // The report says so in one voice: never signalled, so it did not "survive" anything, and
  // no advice to kill what was left running on purpose.
  const std::string said = job.stderr_text();
  EXPECT_NE(said.find("gpureap run:   PID " + std::to_string(server) +
                      ": not signalled: still running: an MPS server the job started serves clients outside the job"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("survived every signal"), std::string::npos) << said;
  EXPECT_EQ(said.find("gpureap kill " + std::to_string(server)), std::string::npos) << said;
  EXPECT_EQ(said.find("gpureap kill " + std::to_string(daemon)), std::string::npos) << said;
}

TEST(RunJobMpsClient, ALeftoverWhoseServerIsNotProvenIsLeftRunningAndReportedNotSignalled) {
  SimHost host({"--gpus", "1"});
  const std::string audit = host.state_dir() + "/audit.log";
  // Listed by the MPS call, but connected to no server the driver lists.
  BackgroundRun job(host, {"--poll-interval", "100ms", "--kill-timeout", "1", "--verify-timeout", "0", "--audit-log", audit},
                    {"/bin/sh", "-c", "\"$SIM\" --alloc 0:1GiB:M & sleep 1.5"});
  const auto client = job.sim_ready();
  ASSERT_EQ(client.size(), 1u);
  EXPECT_EQ(job.wait(), 123) << job.stderr_text();
  const auto report = job.report();
  const auto* e = ended_entry(report, client[0]);
  ASSERT_NE(e, nullptr) << report.dump(2);
  EXPECT_EQ((*e)["outcome"], "refused");
  EXPECT_NE((*e)["detail"].get<std::string>().find("its MPS server is not proven"), std::string::npos) << report.dump(2);
  EXPECT_TRUE(running(client[0]));
  EXPECT_EQ(audited_pids(audit).count(client[0]), 0u);
}

}  // namespace
}  // namespace gpureap::test
