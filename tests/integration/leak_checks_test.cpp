// LeakSanitizer's check at exit, where the other tests leave it off (child_leak_checks.hpp):
// each command once, on a host with holders, and proof that the check is on here and off for
// the other tests' programs.
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_leak_checks.hpp"
#include "fake_prometheus.hpp"
#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "watch_support.hpp"

namespace gpureap::test {
namespace {

std::map<std::string, std::string> leak_checked_env() { return {{"ASAN_OPTIONS", asan_options_with_leak_check()}}; }

// gpureap <args> with the check at exit: it exits `expected` and reports no leak.
void expect_no_leak(const SimHost& host, const std::vector<std::string>& args, int expected = 0) {
  std::string shown = "gpureap";
  for (const auto& arg : args) shown += " " + arg;
  const auto result = host.gpureap(args, leak_checked_env());
  EXPECT_EQ(result.exit_code, expected) << shown << "\n" << result.err;
  EXPECT_EQ(result.err.find("LeakSanitizer"), std::string::npos) << shown << "\n" << result.err;
}

TEST(LeakChecks, OnlyAProgramGivenTheCheckIsChecked) {
  if (!kUnderAddressSanitizer) GTEST_SKIP() << "not built with AddressSanitizer";
  const auto unchecked = run_command({LEAKER_BINARY});
  EXPECT_EQ(unchecked.exit_code, 0) << unchecked.err;
  EXPECT_EQ(unchecked.err.find("LeakSanitizer"), std::string::npos) << unchecked.err;

  SpawnOptions checked;
  checked.env = leak_checked_env();
  const auto found = run_command({LEAKER_BINARY}, checked);
  EXPECT_NE(found.exit_code, 0);
  EXPECT_NE(found.err.find("LeakSanitizer: detected memory leaks"), std::string::npos) << found.err;
}

TEST(LeakChecks, TheLookingCommandsLeaveNoLeak) {
  if (!kUnderAddressSanitizer) GTEST_SKIP() << "not built with AddressSanitizer";
  SimHost host({"--gpus", "2"});
  auto holder = host.start({"--alloc", "0:1GiB", "--workers", "1"});
  expect_no_leak(host, {"--version"});
  expect_no_leak(host, {"ps"});
  expect_no_leak(host, {"ps", "--json", "--tree"});
  expect_no_leak(host, {"doctor", "--no-kernel-log"});
  expect_no_leak(host, {"doctor", "--json", "--no-kernel-log"});
  expect_no_leak(host, {"export", "--once", "--per-process", "--no-kernel-log"});
  expect_no_leak(host, {"top", "--once"});
  const std::string policy = write_file(host, "policy.toml",
                                        "[[rule]]\nname = \"idle\"\ncondition = \"idle\"\nidle_for = \"1h\"\n"
                                        "action = \"log\"\n");
  expect_no_leak(host, {"watch", "--check-config", policy});
  EXPECT_TRUE(running(holder.pid));
}

TEST(LeakChecks, TheEndingCommandsLeaveNoLeakAndEndOnlyTheirTargets) {
  if (!kUnderAddressSanitizer) GTEST_SKIP() << "not built with AddressSanitizer";
  SimHost host({"--gpus", "2"});
  auto target = host.start({"--alloc", "0:1GiB"});
  auto reaped = host.start({"--alloc", "1:1GiB"});
  auto bystander = host.start({"--alloc", "0:1GiB"});
  expect_no_leak(host, {"kill", std::to_string(target.pid), "--yes"});
  EXPECT_TRUE(eventually([&] { return !running(target.pid); }));
  expect_no_leak(host, {"reap", "--uid", std::to_string(getuid()), "--gpus", "1", "--kill-timeout", "2", "--verify-timeout", "5"});
  EXPECT_TRUE(eventually([&] { return !running(reaped.pid); }));
  expect_no_leak(host, {"run", "--", "/bin/true"});
  EXPECT_TRUE(running(bystander.pid));
}

TEST(LeakChecks, FleetLeavesNoLeak) {
  if (!kUnderAddressSanitizer) GTEST_SKIP() << "not built with AddressSanitizer";
  FakePrometheus prometheus;
  prometheus.add_host("node-a:9874");
  SpawnOptions options;
  options.env = leak_checked_env();
  const auto result = run_command({gpureap_binary(), "fleet", "--prometheus", prometheus.url(), "--json"}, options);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err.find("LeakSanitizer"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace gpureap::test
