// `watch --check-config` says what the daemon would say at start: a policy it passes starts,
// one it refuses is refused with the daemon's words and status 2, so that a CI check of the file
// cannot pass a unit that then fails to start.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "sim_harness.hpp"
#include "watch_support.hpp"

namespace gpureap::test {
namespace {

const std::string kTerminateRule =
    "[[rule]]\nname = \"idle\"\ncondition = \"idle\"\nidle_for = \"300ms\"\naction = \"terminate\"\n";

TEST(WatchCheckConfig, EnforceWithATerminateRuleAndNoAuditLogIsRefusedAsAtStart) {
  SimHost host;
  const std::string policy = write_file(host, "no-audit.toml", "mode = \"enforce\"\n" + kTerminateRule);
  const auto check = host.gpureap({"watch", "--check-config", policy});
  const auto start = host.gpureap({"watch", "--policy", policy});
  EXPECT_EQ(check.exit_code, 2) << check.out;
  EXPECT_NE(check.err.find("every signal must be in an audit log"), std::string::npos) << check.err;
  EXPECT_EQ(check.err, start.err) << "the same refusal as the daemon's";
  // Given the audit log the daemon would use, it passes.
  const auto with_log = host.gpureap({"watch", "--check-config", policy, "--audit-log", host.state_dir() + "/audit.log"});
  EXPECT_EQ(with_log.exit_code, 0) << with_log.err;
}

// The paths the daemon opens at start: the audit log (a directory that does not exist, a
// symlink, a FIFO) and the notification program (missing, or one others could change while
// root runs it). check-config refuses each with the daemon's own words, and creates nothing.
TEST(WatchCheckConfig, AnAuditLogOrNotifyProgramTheDaemonCannotUseIsRefusedAsAtStart) {
  SimHost host;
  const std::string dir = host.state_dir();
  const std::string fifo = dir + "/audit.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(symlink((dir + "/elsewhere.log").c_str(), (dir + "/link.log").c_str()), 0);
  const std::string loose = write_file(host, "loose.sh", "#!/bin/sh\ncat >/dev/null\n");
  ASSERT_EQ(chmod(loose.c_str(), 0777), 0);
  const std::string good = write_file(host, "good.sh", "#!/bin/sh\ncat >/dev/null\n");
  ASSERT_EQ(chmod(good.c_str(), 0755), 0);
  const std::string rule = "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"1h\"\naction = \"notify\"\n";
  auto policy_with = [&](const std::string& audit_log, const std::string& program) {
    return write_file(host, "paths.toml", std::string(kFast) + "audit_log = \"" + audit_log + "\"\n[notify]\ncommand = [\"" +
                                              program + "\"]\n" + rule);
  };
  const struct {
    std::string audit_log, program, says;
  } cases[] = {
      {"/nonexistent-gpureap-dir/audit.log", good, "cannot use /nonexistent-gpureap-dir/audit.log as the audit log: No such file or directory"},
      {dir + "/link.log", good, "as the audit log: a symbolic link (never followed)"},
      {fifo, good, "as the audit log: not a regular file"},
      {dir + "/audit.log", "/nonexistent-gpureap-dir/notify", "notify.command: cannot open /nonexistent-gpureap-dir/notify"},
      {dir + "/audit.log", loose, "notify.command: " + loose + " is writable by group or others"},
  };
  for (const auto& c : cases) {
    const std::string policy = policy_with(c.audit_log, c.program);
    const auto check = host.gpureap({"watch", "--check-config", policy});
    const auto start = host.gpureap({"watch", "--policy", policy});
    EXPECT_EQ(check.exit_code, 2) << c.says << "\n" << check.err;
    EXPECT_EQ(start.exit_code, 2) << c.says << "\n" << start.err;
    EXPECT_NE(check.err.find(c.says), std::string::npos) << check.err;
    EXPECT_EQ(check.err, start.err) << "the same refusal as the daemon's";
  }
  // A valid policy passes, and the check leaves its audit log uncreated.
  const auto valid = host.gpureap({"watch", "--check-config", policy_with(dir + "/audit.log", good)});
  EXPECT_EQ(valid.exit_code, 0) << valid.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/audit.log"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/elsewhere.log")) << "the symlink was not followed";
}

TEST(WatchCheckConfig, AGpuThisHostDoesNotHaveIsRefusedWhenADriverIsThere) {
  SimHost host;  // two GPUs
  const std::string gpu7 =
      write_file(host, "gpu7.toml", std::string(kFast) + "[[rule]]\nname = \"g\"\ncondition = \"orphan\"\ngpus = [7]\n");
  const auto check = host.gpureap({"watch", "--check-config", gpu7});
  EXPECT_EQ(check.exit_code, 2) << check.out;
  EXPECT_EQ(check.err, "gpureap watch: " + gpu7 + ":6:9: rule \"g\": gpus: no GPU 7 on this host (it has: 0, 1)\n");
  // Without a driver the check cannot be made, and says so.
  const auto no_driver = host.gpureap({"watch", "--check-config", gpu7}, {{"GPUREAP_NVML_LIBRARY", "/nonexistent"}});
  EXPECT_EQ(no_driver.exit_code, 0) << no_driver.err;
  EXPECT_NE(no_driver.err.find("note: the GPUs the rules name were not checked"), std::string::npos) << no_driver.err;
}

TEST(WatchCheckConfig, MaxTerminationsZeroInEnforceModeIsAWarning) {
  SimHost host;
  const std::string policy = write_file(host, "zero.toml",
                                        "mode = \"enforce\"\naudit_log = \"" + host.state_dir() +
                                            "/audit.log\"\n[limits]\nmax_terminations = 0\n" + kTerminateRule);
  const auto check = host.gpureap({"watch", "--check-config", policy});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_NE(check.err.find("warning: limits.max_terminations = 0 in enforce mode"), std::string::npos) << check.err;
}

// The stop the service manager allows (the unit's TimeoutStopSec, as --stop-timeout) against
// the longest stop the policy allows: a notification command running when the stop comes gets
// its own timeout. A policy that would be SIGKILLed mid-ladder is refused, naming the key, by
// check-config and the daemon alike.
TEST(WatchCheckConfig, APolicyWhoseStopMayOutlastTheStopTimeoutIsRefusedNamingTheKey) {
  SimHost host;
  const std::string program = write_file(host, "notify.sh", "#!/bin/sh\ncat >/dev/null\n");
  ASSERT_EQ(chmod(program.c_str(), 0755), 0);
  const std::string policy = write_file(
      host, "stop.toml",
      std::string(kFast) + "[notify]\ncommand = [\"" + program + "\"]\ncommand_timeout = \"50s\"\n" +
          "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"1h\"\naction = \"notify\"\n");
  const auto check = host.gpureap({"watch", "--check-config", policy, "--stop-timeout", "60s"});
  const auto start = host.gpureap({"watch", "--policy", policy, "--stop-timeout", "60s"});
  EXPECT_EQ(check.exit_code, 2) << check.out;
  EXPECT_NE(check.err.find("notify.command_timeout = 50s"), std::string::npos) << check.err;
  EXPECT_NE(check.err.find("--stop-timeout 1m"), std::string::npos) << check.err;
  EXPECT_EQ(start.exit_code, 2);
  EXPECT_EQ(check.err, start.err) << "the same refusal as the daemon's";
  // With room for the command's 50 s on top of the daemon's own bound, it passes.
  const auto roomy = host.gpureap({"watch", "--check-config", policy, "--stop-timeout", "2m"});
  EXPECT_EQ(roomy.exit_code, 0) << roomy.err;
  // Without a notification command the daemon's own bound is what must fit.
  const std::string quiet = write_file(
      host, "quiet.toml",
      std::string(kFast) + "[[rule]]\nname = \"old\"\ncondition = \"over-age\"\nolder_than = \"1h\"\n");
  const auto tight = host.gpureap({"watch", "--check-config", quiet, "--stop-timeout", "5s"});
  EXPECT_EQ(tight.exit_code, 2) << tight.out;
  EXPECT_NE(tight.err.find("--stop-timeout 5s"), std::string::npos) << tight.err;
}

}  // namespace
}  // namespace gpureap::test
