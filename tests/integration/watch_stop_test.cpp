// A stop in the middle of an action: systemd's SIGTERM while watch's ladder holds a process
// stopped. watch must continue what it stopped, report, and exit within kMaxStopSeconds (the
// unit's TimeoutStopSec covers it), whatever the policy's kill and verify timeouts, and touch
// no bystander.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "watch/watch_daemon.hpp"
#include "watch_support.hpp"

namespace gpureap::test {
namespace {

// The audit log announces `signal` to pid: its "sending" line is written (and being flushed).
bool announced(const std::string& log, pid_t pid, const std::string& signal) {
  return audit_count(audit_lines(log), pid, signal, "sending") > 0;
}

TEST(WatchStop, ASigtermMidLadderContinuesTheStoppedTargetAndExitsPromptly) {
  SimHost host;
  // It ignores SIGTERM: with kill_timeout = 1h the ladder would wait an hour before SIGKILL.
  auto target = host.start({"--alloc", "0:1GiB", "--on-sigterm", "ignore", "--name", "stubborn-trainer"});
  auto bystander = host.start({"--alloc", "1:1GiB", "--name", "bystander"});
  const std::string audit = host.state_dir() + "/audit.log";
  const std::string policy = write_file(
      host, "stop.toml",
      std::string("mode = \"enforce\"\n") + kFast + "audit_log = \"" + audit + "\"\n" +
          "[terminate]\nkill_timeout = \"1h\"\nverify_timeout = \"1h\"\n"
          "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"100ms\"\naction = \"terminate\"\n"
          "grace = \"0s\"\ncommand = \"stubborn-trainer\"\n");
  // Every audit flush takes a second: the ladder holds the target stopped while it writes
  // the SIGTERM lines, a window wide enough to stop watch in.
  BackgroundWatch watch(host, policy, {},
                        {{"LD_PRELOAD", SLOW_FDATASYNC_LIBRARY}, {"GPUREAP_TEST_FDATASYNC_MS", "1000"}});
  ASSERT_TRUE(eventually([&] { return announced(audit, target.pid, "SIGTERM"); }, 60000))
      << "the ladder never reached its signal step";
  EXPECT_TRUE(audited(audit_lines(audit), target.pid, "SIGSTOP")) << "the target is held stopped now";

  const auto asked = std::chrono::steady_clock::now();
  EXPECT_EQ(watch.stop(SIGTERM, 60000), 0);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  EXPECT_LT(took, kMaxStopSeconds) << "the stop waited for the ladder";

  // Continued and left running: nothing stays stopped after watch.
  EXPECT_TRUE(running(target.pid));
  EXPECT_NE(process_state(target.pid), 'T');
  EXPECT_TRUE(audited(audit_lines(audit), target.pid, "SIGCONT"));
  const auto ended = watch.wait_for("terminate", {{"pid", std::to_string(target.pid)}});
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->field("outcome"), "survived");
  EXPECT_NE(ended->field("message").find("interrupted by SIGTERM"), std::string::npos) << ended->raw;
  EXPECT_TRUE(watch.wait_for("stop", {{"signal", "SIGTERM"}}));
  // The bystander was never signalled.
  EXPECT_TRUE(running(bystander.pid));
  EXPECT_NE(process_state(bystander.pid), 'T');
  EXPECT_FALSE(audited_any(audit_lines(audit), bystander.pid));
}

}  // namespace
}  // namespace gpureap::test
