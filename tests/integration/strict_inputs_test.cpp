// Filters and configuration that name something which does not exist are errors with one line
// and exit 2, never an empty listing or a silently lost protection; nothing is signalled.
#include <fstream>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

void expect_one_line_usage_error(const CommandResult& r, const std::string& words) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(words), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
}

TEST(StrictInputs, UnknownUserIsAnErrorForPsAndKillButANumericUidIsAccepted) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  expect_one_line_usage_error(host.gpureap({"ps", "--user", "no-such-user"}), "--user no-such-user");
  expect_one_line_usage_error(host.gpureap({"ps", "--user", "root,no-such-user"}), "no-such-user");
  expect_one_line_usage_error(host.gpureap({"kill", "--user", "no-such-user", "--yes"}), "--user no-such-user");
  EXPECT_TRUE(running(job.pid));
  // A uid with no passwd entry: a valid filter that matches nothing here.
  EXPECT_EQ(host.gpureap({"ps", "--user", "4000123"}).exit_code, 0);
  EXPECT_EQ(host.gpureap({"kill", "--user", "4000123", "--yes"}).exit_code, 9);
  EXPECT_TRUE(running(job.pid));
}

TEST(StrictInputs, UnknownContainerIsAnErrorForPsAndKill) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  expect_one_line_usage_error(host.gpureap({"ps", "--container", "0123456789ab"}), "--container 0123456789ab");
  expect_one_line_usage_error(host.gpureap({"kill", "--container", "0123456789ab", "--yes"}),
                              "--container 0123456789ab");
  EXPECT_TRUE(running(job.pid));
}

TEST(StrictInputs, MisspeltConfigurationIsAnErrorAndNothingIsSignalled) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string config = host.config_dir() + "/config.toml";
  for (const char* text : {"[kill]\nprotekt = [\"gpusim-cuda\"]\n", "[Kill]\nprotect = [\"gpusim-cuda\"]\n",
                           "[kill]\nprotect = \"gpusim-cuda\"\n"}) {
    std::ofstream(config) << text;
    const auto r = host.gpureap({"kill", std::to_string(job.pid), "--yes"}, {{"GPUREAP_CONFIG", config}});
    expect_one_line_usage_error(r, config + ":");
    EXPECT_TRUE(running(job.pid)) << text;
  }
}

}  // namespace
}  // namespace gpureap::test
