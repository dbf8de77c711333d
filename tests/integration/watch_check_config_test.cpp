// `watch --check-config` says what the daemon would say at start: a policy it passes starts,
// one it refuses is refused with the daemon's words and status 2, so that a CI check of the file
// cannot pass a unit that then fails to start.
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

}  // namespace
}  // namespace gpureap::test
