// `kill --name` against a hostile command line: any user can give a process a 100 kB argv[0];
// root's `gpureap kill --name` must neither crash on it (std::regex recursed once per
// character) nor accept a pattern that its parser cannot bound.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(HostileNamePattern, AHugeCommandLineNeitherCrashesNorHidesTheMatch) {
  SimHost host;
  const std::string huge(100000, 'a');
  auto job = host.start_program("/bin/bash", {"-c", std::string("exec -a \"$0\" ") + GPUSIM_CUDA_BINARY + " --alloc 0:1GiB", huge});
  ASSERT_GT(job.pid, 0);

  int code = -1;
  std::string err;
  auto none = kill_json(host, {"--name", "(a|b)*zq", "--dry-run"}, &code, &err);
  EXPECT_EQ(code, 9) << err;  // nothing matched, and no crash

  auto report = kill_json(host, {"--name", "^a+ --alloc", "--dry-run"}, &code, &err);
  EXPECT_EQ(code, 0) << err;
  EXPECT_NE(kill_target(report, job.pid), nullptr) << report.dump();
  EXPECT_TRUE(running(job.pid));
}

TEST(HostileNamePattern, AnOverlongOrInvalidPatternIsOneUsageLine) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  for (const std::string& pattern : {std::string(30000, '('), std::string("a("), std::string(2000, 'a')}) {
    const auto result = host.gpureap({"kill", "--name", pattern, "--all"});
    EXPECT_EQ(result.exit_code, 2) << result.err.substr(0, 300);
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err.substr(0, 300);
    EXPECT_NE(result.err.find("--name"), std::string::npos) << result.err.substr(0, 300);
  }
  EXPECT_TRUE(running(job.pid));
}

}  // namespace
}  // namespace gpureap::test
