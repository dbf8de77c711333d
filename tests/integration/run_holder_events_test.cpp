// `gpureap run` and the job's GPU holders: a process of the job that opens a GPU device file
// between two looks is known from the kernel's events at once (a GPU user for --fail-fast),
// and one that opens a GPU while the job is ending (a worker's cleanup after the main command
// exited) has that GPU's release verified, with events and without them (the looks alone).
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "run_support.hpp"

namespace gpureap::test {
namespace {

// Writes `text` to a script in the host's state directory and returns its path.
std::string script(const SimHost& host, const std::string& name, const std::string& text) {
  const std::string path = host.state_dir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(RunHolderEvents, AWorkerThatOpensAGpuBetweenLooksFailsTheJobFast) {
  if (!running_as_root()) GTEST_SKIP() << "fanotify and the kernel's exit events need root";
  SimHost host;
  const std::string go = host.state_dir() + "/go";
  // The worker opens GPU 1's device file when told, says so and waits; the main command
  // outlives it. Looks are a minute apart: only the events can tell run that the worker used
  // a GPU before it dies.
  const std::string worker = script(host, "worker.sh",
                                    "echo STARTED $$\n"
                                    "while [ ! -e '" + go + "' ]; do sleep 0.02; done\n"
                                    "exec 3<>\"$GPUREAP_DEV_DIR/nvidia1\"\n"
                                    "echo OPENED $$\n"
                                    "exec sleep 120\n");
  BackgroundRun run(host, {"--fail-fast", "--poll-interval", "60s", "--kill-timeout", "2"},
                    {"/bin/sh", "-c", "/bin/sh '" + worker + "' & exec sleep 120"});
  const auto started = run.line_starting("STARTED ");
  ASSERT_EQ(started.size(), 1u);
  const pid_t pid = std::stoi(started[0]);
  run.remember(pid);
  // run's first look is 100 ms after the start; the open comes after it (were the look late,
  // it would see the open itself, and the job would fail fast all the same).
  poll(nullptr, 0, 1000);
  std::ofstream(go) << "go\n";
  ASSERT_EQ(run.line_starting("OPENED "), std::vector<std::string>{std::to_string(pid)});
  // The open's event is read within milliseconds; the kill comes well after.
  poll(nullptr, 0, 500);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(run.wait(20000), 128 + SIGKILL);
  const auto report = run.report();
  EXPECT_TRUE(report["holder_events"].get<bool>()) << report.dump(2);
  EXPECT_EQ(report["end"], "fail-fast") << report.dump(2);
  EXPECT_EQ(report["failed_process"]["pid"], pid);
  EXPECT_GE(report["looks_on_events"].get<int>(), 1);
  const auto& gpu = gpu_entry(report, 1);  // (sim_harness's: an empty object when missing)
  ASSERT_FALSE(gpu.empty()) << report.dump(2);
  EXPECT_EQ(gpu["job_pids"], nlohmann::json::array({pid}));
}

class RunHolderEventsEnding : public ::testing::TestWithParam<bool> {};

TEST_P(RunHolderEventsEnding, AWorkerThatOpensAGpuAfterTheMainCommandExitedIsFoundAndItsMemoryVerified) {
  const bool events = GetParam();
  if (events && !running_as_root()) GTEST_SKIP() << "fanotify needs root";
  SimHost host;
  const std::string ready = host.state_dir() + "/worker-ready";
  // The main command forks a worker and exits; the worker's answer to SIGTERM (run's end of
  // what was left) is to start a GPU process of its own, which ignores SIGTERM too.
  const std::string worker = script(host, "worker.sh",
                                    "trap '\"$SIM\" --alloc 1:256MiB --on-sigterm ignore & wait' TERM\n"
                                    ": > '" + ready + "'\n"
                                    "while :; do sleep 0.05; done\n");
  std::vector<std::string> prefix;
  if (!events) prefix = {"/usr/bin/env", "GPUREAP_HOLDER_EVENTS=off"};
  BackgroundRun run(host, {"--poll-interval", "100ms", "--kill-timeout", "3"},
                    {"/bin/sh", "-c",
                     "/bin/sh '" + worker + "' & while [ ! -e '" + ready + "' ]; do sleep 0.02; done; exit 0"},
                    false, prefix);
  const auto gpu_process = run.sim_ready();
  ASSERT_EQ(gpu_process.size(), 1u);
  EXPECT_EQ(run.wait(), 0);
  const auto report = run.report();
  EXPECT_EQ(report["holder_events"].get<bool>(), events) << report.dump(2);
  const auto& gpu = gpu_entry(report, 1);
  ASSERT_FALSE(gpu.empty()) << "GPU 1, which the job used while it ended, is not in the report: " << report.dump(2);
  EXPECT_NE(std::find(gpu["job_pids"].begin(), gpu["job_pids"].end(), gpu_process[0]), gpu["job_pids"].end())
      << gpu.dump(2);
  EXPECT_TRUE(gpu["verified_free"].get<bool>()) << gpu.dump(2);
  const auto* ended = ended_entry(report, gpu_process[0]);
  ASSERT_NE(ended, nullptr) << report.dump(2);
  EXPECT_EQ((*ended)["outcome"], "killed");
  EXPECT_FALSE(running(gpu_process[0]));
}

INSTANTIATE_TEST_SUITE_P(EventsOrLooks, RunHolderEventsEnding, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& run) { return run.param ? "Events" : "LooksAlone"; });

}  // namespace
}  // namespace gpureap::test
