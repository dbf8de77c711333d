// A ladder under way does not hold the daemon: while one process that ignores SIGTERM waits
// out a long kill_timeout, watch keeps looking, and a second process that comes to match is
// ended without waiting for the first; two rules matching one process start one ladder. A
// stop then interrupts the first ladder: it is continued and left running, the stop is
// prompt, and a bystander is never signalled.
#include <signal.h>

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "watch/watch_daemon.hpp"
#include "watch_support.hpp"

namespace gpureap::test {
namespace {

// How many times the audit log records `signal` as sent to pid (whatever the result).
int sent_count(const std::string& log, pid_t pid, const std::string& signal) {
  return audit_count(audit_lines(log), pid, signal, "sent");
}
bool sent(const std::string& log, pid_t pid, const std::string& signal) { return sent_count(log, pid, signal) > 0; }

TEST(WatchLadder, ASecondMatchIsEndedWhileTheFirstLadderWaitsAndAStopContinuesTheFirst) {
  SimHost host;
  auto stubborn = host.start({"--alloc", "0:1GiB", "--on-sigterm", "ignore", "--name", "stubborn-trainer"});
  auto bystander = host.start({"--alloc", "1:1GiB", "--name", "bystander"});
  const std::string audit = host.state_dir() + "/audit.log";
  const std::string policy = write_file(
      host, "ladder.toml",
      std::string("mode = \"enforce\"\n") + kFast + "audit_log = \"" + audit + "\"\n" +
          "[terminate]\nkill_timeout = \"1h\"\nverify_timeout = \"1h\"\n"
          "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"100ms\"\naction = \"terminate\"\n"
          "grace = \"0s\"\ncommand = \"trainer\"\n"
          // A second rule over the same processes: a process being ended is not started twice.
          "[[rule]]\nname = \"big\"\ncondition = \"memory\"\nmemory_above = \"256MiB\"\naction = \"terminate\"\n"
          "grace = \"0s\"\ncommand = \"trainer\"\n");
  BackgroundWatch watch(host, policy);
  // The first ladder has sent SIGTERM, which is ignored: it now waits up to an hour for SIGKILL.
  ASSERT_TRUE(eventually([&] { return sent(audit, stubborn.pid, "SIGTERM"); }, 60000))
      << "the first ladder never reached its signal step";

  auto late = host.start({"--alloc", "1:512MiB", "--name", "late-trainer"});
  const auto ended = watch.wait_for("terminate", {{"pid", std::to_string(late.pid)}}, 60000);
  ASSERT_TRUE(ended) << "the second process waited for the first ladder";
  EXPECT_EQ(ended->field("outcome"), "exited") << ended->raw;
  EXPECT_TRUE(eventually([&] { return !running(late.pid); }, 10000));
  EXPECT_TRUE(sent(audit, late.pid, "SIGTERM"));
  // The first ladder is still under way: no report for it, its process is alive, and neither
  // rule started a second ladder on it (looks went on meanwhile: the second was found).
  EXPECT_EQ(watch.count("terminate", {{"pid", std::to_string(stubborn.pid)}}), 0u);
  EXPECT_TRUE(running(stubborn.pid));
  EXPECT_EQ(sent_count(audit, stubborn.pid, "SIGTERM"), 1);
  EXPECT_EQ(sent_count(audit, late.pid, "SIGTERM"), 1);

  const auto asked = std::chrono::steady_clock::now();
  EXPECT_EQ(watch.stop(SIGTERM, 60000), 0);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  EXPECT_LT(took, kMaxStopSeconds) << "the stop waited for the ladder";
  const auto first = watch.wait_for("terminate", {{"pid", std::to_string(stubborn.pid)}});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->field("outcome"), "survived");
  EXPECT_NE(first->field("message").find("interrupted by SIGTERM"), std::string::npos) << first->raw;
  EXPECT_TRUE(watch.wait_for("stop", {{"signal", "SIGTERM"}}));
  // Nothing is left stopped, and the bystander was never signalled.
  EXPECT_TRUE(running(stubborn.pid));
  EXPECT_NE(process_state(stubborn.pid), 'T');
  EXPECT_TRUE(audited(audit_lines(audit), stubborn.pid, "SIGCONT"));
  EXPECT_TRUE(running(bystander.pid));
  EXPECT_NE(process_state(bystander.pid), 'T');
  EXPECT_FALSE(audited_any(audit_lines(audit), bystander.pid));
}

}  // namespace
}  // namespace gpureap::test
