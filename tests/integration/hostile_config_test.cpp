// The configuration file ($GPUREAP_CONFIG) as hostile or mistaken input: a misspelt key or
// section must not silently drop protection, and a FIFO, a device or a directory must be an
// error (exit 2, one line), never a hang or silence; nothing is signalled.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

void expect_config_refused(const SimHost& host, const std::string& config, pid_t bystander, const std::string& says) {
  const auto result = host.gpureap({"kill", "--all", "--yes", "--no-verify"}, {{"GPUREAP_CONFIG", config}});
  EXPECT_EQ(result.exit_code, 2) << config << ": " << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  EXPECT_NE(result.err.find(says), std::string::npos) << result.err;
  EXPECT_TRUE(running(bystander)) << config;
}

TEST(HostileConfig, AMisspeltKeyOrSectionIsAnErrorNotLostProtection) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string key = host.config_dir() + "/key.toml";
  std::ofstream(key) << "[kill]\nprotekt = [\"gpusim-cuda\"]\n";
  expect_config_refused(host, key, job.pid, "protekt");
  const std::string section = host.config_dir() + "/section.toml";
  std::ofstream(section) << "[Kill]\nprotect = [\"gpusim-cuda\"]\n";
  expect_config_refused(host, section, job.pid, "Kill");
}

TEST(HostileConfig, AFifoADeviceOrADirectoryIsAnErrorNotAHang) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string fifo = host.state_dir() + "/config.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_config_refused(host, fifo, job.pid, "not a regular file");
  expect_config_refused(host, "/dev/zero", job.pid, "not a regular file");
  expect_config_refused(host, host.state_dir(), job.pid, "not a regular file");
}

TEST(HostileConfig, DoctorFixRefusesTheSameFile) {
  SimHost host;
  auto job = host.start({"--alloc", "0:1GiB"});
  const std::string key = host.config_dir() + "/key.toml";
  std::ofstream(key) << "[kill]\nprotekt = [\"x\"]\n";
  const auto result = host.gpureap({"doctor", "--fix", "--yes", "--no-kernel-log"}, {{"GPUREAP_CONFIG", key}});
  EXPECT_EQ(result.exit_code, 11) << result.err;
  EXPECT_NE(result.err.find("protekt"), std::string::npos) << result.err;
  EXPECT_TRUE(running(job.pid));
}

}  // namespace
}  // namespace gpureap::test
