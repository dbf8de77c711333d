// `--user` with a name no account has (a typo, or 10 kB of junk): a one-line usage error
// (exit 2), not "no processes listed" (exit 0) or "nothing matched" that reads as an answer.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

void expect_unknown_user(const CommandResult& result) {
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_NE(result.err.find("no such user"), std::string::npos) << result.err;
  EXPECT_LT(result.err.size(), 300u) << result.err;
}

TEST(HostileUserOption, AnUnknownUserIsAUsageErrorForPsAndKill) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string junk(10000, 'a');
  for (const std::string& user : {std::string("no-such-user"), junk, std::string("root,no-such-user")}) {
    expect_unknown_user(host.gpureap({"ps", "--user", user}));
    expect_unknown_user(host.gpureap({"kill", "--user", user, "--yes"}));
  }
  EXPECT_TRUE(running(job.pid));
}

// `--gpu "$UNSET"` must not read as "no GPU filter": with --user it would take every GPU.
TEST(HostileUserOption, AnEmptySelectionValueIsRefusedAndNothingIsSignalled) {
  SimHost host;
  auto on_gpu0 = host.start({"--alloc", "0:1GiB"});
  auto on_gpu1 = host.start({"--alloc", "1:1GiB"});
  for (const std::string option : {"--gpu", "--user", "--name", "--container"}) {
    std::vector<std::string> args = {"kill", "--user", "root", option, "", "--yes"};
    const auto result = host.gpureap(args);
    EXPECT_EQ(result.exit_code, 2) << option << ": " << result.err;
    EXPECT_NE(result.err.find(option + " was given an empty value"), std::string::npos) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
  EXPECT_TRUE(running(on_gpu0.pid));
  EXPECT_TRUE(running(on_gpu1.pid));
}

// The option parser's own errors repeat the argument: escaped like every other text, one line.
TEST(HostileUserOption, AnUnknownOptionIsShownEscapedOnOneLine) {
  SimHost host;
  const std::string hostile = "--x\x1b]0;pwned\x07\x1b[2J";
  for (const auto& [command, code] : std::vector<std::pair<std::string, int>>{
           {"ps", 2}, {"kill", 2}, {"doctor", 11}, {"run", 125}, {"reap", 2}}) {
    const auto result = host.gpureap({command, hostile});
    EXPECT_EQ(result.exit_code, code) << command << ": " << result.err;
    EXPECT_EQ(result.err.find('\x1b'), std::string::npos) << command << ": " << result.err;
    EXPECT_NE(result.err.find("--x\\x1b]0;pwned\\x07"), std::string::npos) << command << ": " << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << command << ": " << result.err;
  }
}

TEST(HostileUserOption, AKnownNameOrANumericUidStillSelects) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  for (const std::string& user : {std::string("root"), std::string("0"), std::string("4294967294")}) {
    const auto result = host.gpureap({"ps", "--user", user});
    EXPECT_EQ(result.exit_code, 0) << user << ": " << result.err;
  }
  int code = -1;
  auto report = kill_json(host, {"--user", "root", "--dry-run"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(kill_target(report, job.pid), nullptr) << report.dump();
  EXPECT_TRUE(running(job.pid));
}

// `ps --pid 0` or `--pid -3` once listed nothing with exit 0, as if the PID had no GPU process.
TEST(HostileUserOption, PsPidThatIsNotAPidIsAUsageError) {
  SimHost host;
  for (const std::string& pid : {std::string("0"), std::string("-3")}) {
    const auto result = host.gpureap({"ps", "--pid", pid});
    EXPECT_EQ(result.exit_code, 2) << pid << ": " << result.out << result.err;
    EXPECT_NE(result.err.find("not a valid PID"), std::string::npos) << result.err;
  }
}

}  // namespace
}  // namespace gpureap::test
