// kill(1)'s habits in `gpureap kill`: the signal as the first word (-9, -KILL, -SIGKILL) is the
// first signal; anywhere else it is refused with a hint of where it goes, and nothing is signalled.
#include <signal.h>
#include <sys/wait.h>

#include <string>

#include <gtest/gtest.h>

#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(KillHabits, SignalAsTheFirstWordIsTheFirstSignalAndTheBystanderSurvives) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  auto bystander = host.start({"--alloc", "0:1GiB"});
  const auto result = host.gpureap({"kill", "-9", std::to_string(job.pid), "--yes", "--color", "never"});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("Plan: 1 process to signal (SIGKILL)\n"), std::string::npos) << result.out;
  const int status = job.wait_exit();
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(kill(bystander.pid, 0), 0) << "the bystander was signalled";
}

TEST(KillHabits, SignalNamesAsTheFirstWordAreReadAsKillReadsThem) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  for (const std::string word : {"-KILL", "-SIGKILL", "-sigkill"}) {
    const auto result = host.gpureap({"kill", word, std::to_string(job.pid), "--dry-run", "--color", "never"});
    EXPECT_EQ(result.exit_code, 0) << word << ": " << result.err;
    EXPECT_NE(result.out.find("[dry run] Plan: 1 process to signal (SIGKILL)\n"), std::string::npos) << result.out;
  }
  const auto hup = host.gpureap({"kill", "-HUP", std::to_string(job.pid), "--dry-run", "--color", "never"});
  EXPECT_NE(hup.out.find("[dry run] Plan: 1 process to signal (SIGHUP, then SIGKILL after 10 s)\n"), std::string::npos)
      << hup.out;
  EXPECT_EQ(kill(job.pid, 0), 0) << "a dry run signalled";
}

TEST(KillHabits, SignalAfterThePidIsRefusedWithWhereItGoesAndNothingIsSignalled) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string pid = std::to_string(job.pid);
  const auto numeric = host.gpureap({"kill", pid, "-9", "--yes"});
  EXPECT_EQ(numeric.exit_code, 2);
  EXPECT_EQ(numeric.err,
            "gpureap kill: -9: a signal goes first, as in kill(1) (gpureap kill -9 PID...), or use --signal 9; "
            "nothing was signalled\n");
  const auto named = host.gpureap({"kill", "--yes", pid, "-SIGKILL"});
  EXPECT_EQ(named.exit_code, 2);
  EXPECT_EQ(named.err,
            "gpureap kill: -SIGKILL: a signal goes first, as in kill(1) (gpureap kill -SIGKILL PID...), or use "
            "--signal SIGKILL; nothing was signalled\n");
  // gpureap has exited: had it signalled, the signal would already be pending or delivered.
  EXPECT_EQ(kill(job.pid, 0), 0);
  EXPECT_NE(find_process(host.ps_json(), job.pid), nullptr) << "the process is gone";
}

}  // namespace
}  // namespace gpureap::test
