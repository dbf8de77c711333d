// The shipped unit gives watch's stop more time than the daemon can take: systemd's SIGKILL
// after TimeoutStopSec, in the middle of a ladder, would leave processes stopped.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "text/duration.hpp"
#include "watch/watch_daemon.hpp"

namespace gpureap {
namespace {

// The value of `key=` in the unit file, "" when absent.
std::string unit_setting(const std::string& path, const std::string& key) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  }
  return {};
}

TEST(DeployWatchStop, TheUnitsStopTimeoutCoversTheDaemonsStopWhateverThePolicySays) {
  const std::string unit = std::string(GPUREAP_DEPLOY_DIR) + "/systemd/gpureap-watch.service";
  const std::string text = unit_setting(unit, "TimeoutStopSec");
  ASSERT_FALSE(text.empty()) << unit << " sets no TimeoutStopSec (systemd's default is 90 s, but say it)";
  const auto seconds = parse_duration(text + (text.find_first_not_of("0123456789") == std::string::npos ? "s" : ""), 86400);
  ASSERT_TRUE(seconds) << text;
  EXPECT_GE(*seconds, 2 * kMaxStopSeconds) << "TimeoutStopSec=" << text << " against a stop of up to " << kMaxStopSeconds << " s";
  EXPECT_EQ(unit_setting(unit, "KillMode"), "mixed") << "SIGTERM to the daemon alone: it ends its notification commands";
  // The daemon checks each policy's stop against the value it is told: the unit's own.
  const std::string exec = unit_setting(unit, "ExecStart");
  const auto at = exec.find("--stop-timeout ");
  ASSERT_NE(at, std::string::npos) << "ExecStart does not tell watch its stop timeout: " << exec;
  std::string told = exec.substr(at + std::string("--stop-timeout ").size());
  told = told.substr(0, told.find(' '));
  EXPECT_EQ(parse_duration(told, 86400), seconds) << "--stop-timeout " << told << " against TimeoutStopSec=" << text;
}

}  // namespace
}  // namespace gpureap
