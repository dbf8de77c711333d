// Files that define what root does — watch's policy (it names a command root runs), the kill
// configuration (what is protected), the exporter's web-config (who may read the node) — are
// read only when nobody but root or the invoking user could have written them, and no reader
// recurses without bound: a file nested 90,000 levels deep (200 KB, under the 1 MiB cap) is one
// line with its place and the documented status in every reader, never SIGSEGV; a running
// watch keeps its policy when such a file is reloaded.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kill_support.hpp"
#include "sim_harness.hpp"
#include "watch_support.hpp"

namespace gpureap::test {
namespace {

std::string nested(const std::string& open, int levels, const std::string& separator = "") {
  std::string out;
  out.reserve(levels * (open.size() + separator.size()));
  for (int i = 0; i < levels; ++i) out += (i == 0 ? "" : separator) + open;
  return out;
}

void expect_one_line(const CommandResult& result, int status, const std::string& says, const std::string& what) {
  EXPECT_EQ(result.exit_code, status) << what << ": " << result.err;
  EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << what << ": " << result.err;
  EXPECT_NE(result.err.find(says), std::string::npos) << what << ": " << result.err;
}

TEST(DeepConfig, EveryTomlReaderRefusesNinetyThousandLevels) {
  SimHost host;
  auto bystander = host.start({"--alloc", "0:1GiB"});
  const std::string header = write_file(host, "deep-header.toml", "[" + nested("a", 90000, ".") + "]\n");
  const std::string dotted = write_file(host, "deep-key.toml", "[kill]\n" + nested("a", 90000, ".") + " = 1\n");
  const std::string arrays = write_file(host, "deep-arrays.toml", "x = " + nested("[", 90000) + "\n");
  ASSERT_GT(std::filesystem::file_size(header), 170000u);
  const std::string marker = host.state_dir() + "/run-started";
  for (const auto& [file, place] :
       std::vector<std::pair<std::string, std::string>>{{header, ":1:129: "}, {dotted, ":2:126: "}, {arrays, ":1:"}}) {
    const std::string says = file + place;
    expect_one_line(host.gpureap({"watch", "--check-config", file}), 2, says, "watch --check-config");
    expect_one_line(host.gpureap({"watch", "--policy", file}), 2, says, "watch --policy");
    const std::map<std::string, std::string> env = {{"GPUREAP_CONFIG", file}};
    expect_one_line(host.gpureap({"kill", "--all", "--yes"}, env), 2, says, "kill");
    expect_one_line(host.gpureap({"reap", "--user", "root"}, env), 2, says, "reap");
    expect_one_line(host.gpureap({"run", "--", "/usr/bin/touch", marker}, env), 125, says, "run");
    EXPECT_FALSE(std::filesystem::exists(marker)) << "run started its command with an invalid configuration";
  }
  EXPECT_TRUE(running(bystander.pid));
}

TEST(DeepConfig, TheWebConfigReaderRefusesNinetyThousandLevels) {
  SimHost host;
  const std::string flow = write_file(host, "deep-flow.yml", nested("[", 90000) + "\n");
  const std::string block = write_file(host, "deep-block.yml", nested("- ", 90000) + "x\n");
  for (const std::string& file : {flow, block}) {
    const auto result = host.gpureap({"export", "--no-kernel-log", "--listen", "127.0.0.1:0", "--web-config", file});
    expect_one_line(result, 2, file + ":1:", "export --web-config");
    EXPECT_NE(result.err.find("nested deeper than 64 levels"), std::string::npos) << result.err;
  }
}

TEST(DeepConfig, AWatchReloadOfADeepPolicyKeepsThePolicyItHad) {
  SimHost host;
  auto first = host.start({"--alloc", "0:1GiB"});
  const std::string rule = "[[rule]]\nname = \"some\"\ncondition = \"memory\"\nmemory_above = \"512MiB\"\n";
  const std::string policy = write_file(host, "policy.toml", std::string(kFast) + rule);
  BackgroundWatch watch(host, policy);
  ASSERT_TRUE(watch.wait_for("notice", {{"rule", "some"}, {"pid", std::to_string(first.pid)}}));
  write_file(host, "policy.toml", std::string(kFast) + "[" + nested("a", 90000, ".") + "]\n");
  watch.signal(SIGHUP);
  const auto failed = watch.wait_for("reload-failed");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->field("why").rfind(policy + ":3:129: nested deeper than 64 levels", 0), 0u) << failed->raw;
  auto second = host.start({"--alloc", "1:1GiB"});
  ASSERT_TRUE(watch.wait_for("notice", {{"rule", "some"}, {"pid", std::to_string(second.pid)}}));
  EXPECT_EQ(watch.stop(), 0);
}

TEST(TrustedConfig, APolicyOthersCanWriteIsRefused) {
  SimHost host;
  const std::string policy = write_file(host, "policy.toml", std::string(kFast));
  ASSERT_EQ(host.gpureap({"watch", "--check-config", policy}).exit_code, 0);
  ASSERT_EQ(::chmod(policy.c_str(), 0664), 0);
  expect_one_line(host.gpureap({"watch", "--check-config", policy}), 2, "is writable by group or others (mode 0664)",
                  "a group-writable policy");
  expect_one_line(host.gpureap({"watch", "--policy", policy}), 2, "chmod go-w", "a group-writable policy");
  // In a directory anyone may write to (the simulator's state directory, mode 0777): anyone
  // could replace it.
  const std::string loose = host.state_dir() + "/policy.toml";
  std::ofstream(loose) << kFast;
  ::chmod(loose.c_str(), 0644);
  expect_one_line(host.gpureap({"watch", "--check-config", loose}), 2,
                  "is in " + host.state_dir() + ", which is writable by group or others", "a policy in a 0777 directory");
}

// The CAs a webhook's certificate is checked against decide where watch sends what root saw:
// the file is trusted as the policy is, or the policy is refused.
TEST(TrustedConfig, AWebhookCaFileOthersCanWriteOrAnotherUserOwnsIsRefused) {
  SimHost host;
  const std::string ca = host.config_dir() + "/ca.pem";
  std::ofstream(ca) << "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  ::chmod(ca.c_str(), 0644);
  const std::string policy = write_file(host, "policy.toml", std::string(kFast) +
                                                                  "[notify]\nwebhook = \"https://127.0.0.1:9/hook\"\n"
                                                                  "webhook_ca_file = \"" + ca + "\"\n");
  ASSERT_EQ(host.gpureap({"watch", "--check-config", policy}).exit_code, 0) << "the trusted CA file is accepted";
  ASSERT_EQ(::chmod(ca.c_str(), 0664), 0);
  expect_one_line(host.gpureap({"watch", "--check-config", policy}), 2,
                  "notify.webhook_ca_file " + ca + " is writable by group or others (mode 0664)", "a group-writable CA file");
  expect_one_line(host.gpureap({"watch", "--policy", policy}), 2, "chmod go-w", "watch with a group-writable CA file");
  ASSERT_EQ(::chmod(ca.c_str(), 0644), 0);
  if (!running_as_root()) return;
  const passwd* user = test_user();
  ASSERT_NE(user, nullptr) << "the test user could not be created";
  ASSERT_EQ(::chown(ca.c_str(), user->pw_uid, user->pw_gid), 0);
  expect_one_line(host.gpureap({"watch", "--check-config", policy}), 2,
                  "belongs to uid " + std::to_string(user->pw_uid) + ", neither root nor the user running gpureap",
                  "another user's CA file");
}

TEST(TrustedConfig, AConfigurationAnotherUserOwnsIsRefusedAndNothingIsSignalled) {
  if (!running_as_root()) GTEST_SKIP() << "needs root to give the file to another user";
  const passwd* user = test_user();
  ASSERT_NE(user, nullptr) << "the test user could not be created";
  SimHost host;
  auto bystander = host.start({"--alloc", "0:1GiB"});
  const std::string config = host.config_dir() + "/config.toml";
  std::ofstream(config) << "[kill]\nprotect = [\"nothing\"]\n";
  ASSERT_EQ(::chown(config.c_str(), user->pw_uid, user->pw_gid), 0);
  const std::map<std::string, std::string> env = {{"GPUREAP_CONFIG", config}};
  expect_one_line(host.gpureap({"kill", "--all", "--yes"}, env), 2,
                  "belongs to uid " + std::to_string(user->pw_uid) + ", neither root nor the user running gpureap",
                  "another user's configuration");
  expect_one_line(host.gpureap({"run", "--", "/bin/true"}, env), 125, "chown it", "run");
  EXPECT_TRUE(running(bystander.pid));

  const std::string web = host.config_dir() + "/web.yml";
  std::ofstream(web) << "basic_auth_users: {}\n";
  ASSERT_EQ(::chown(web.c_str(), user->pw_uid, user->pw_gid), 0);
  expect_one_line(host.gpureap({"export", "--no-kernel-log", "--listen", "127.0.0.1:0", "--web-config", web}), 2,
                  "belongs to uid " + std::to_string(user->pw_uid), "another user's web-config");
}

}  // namespace
}  // namespace gpureap::test
