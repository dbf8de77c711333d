// The [kill] table of the configuration file: protected names and the audit log path.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "kill/kill_config.hpp"

namespace gpureap {
namespace {

class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/gpureap-config-XXXXXX";
    const int fd = mkstemp(templ);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = templ;
  }
  void TearDown() override { unlink(path_.c_str()); }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  std::string path_;
};

TEST_F(ConfigFile, ReadsProtectedNamesAndTheAuditLog) {
  write("# site policy\n[kill]\nprotect = [\"slurmstepd\", \"prom*\"]\naudit_log = \"/var/log/gpureap.log\"\n");
  std::string error;
  const auto config = load_kill_config_from(path_, true, error);
  ASSERT_TRUE(config) << error;
  EXPECT_EQ(config->protect, (std::vector<std::string>{"slurmstepd", "prom*"}));
  EXPECT_EQ(config->audit_log, "/var/log/gpureap.log");
  EXPECT_EQ(config->path, path_);
}

TEST_F(ConfigFile, AMissingKillTableIsFineAndAnUnknownTableIsAnError) {
  write("# nothing configured\n");
  std::string error;
  const auto config = load_kill_config_from(path_, true, error);
  ASSERT_TRUE(config) << error;
  EXPECT_TRUE(config->protect.empty());
  EXPECT_TRUE(config->audit_log.empty());
  // No [ps] table exists: a misspelt or unknown one must not pass unnoticed.
  write("[ps]\ncolor = \"never\"\n");
  EXPECT_FALSE(load_kill_config_from(path_, true, error));
  EXPECT_NE(error.find(path_ + ":1:"), std::string::npos) << error;
}

// A misspelt name would silently drop the protection it was written for.
TEST_F(ConfigFile, UnknownSectionsAndKeysAreErrorsWithTheLine) {
  std::string error;
  write("[kill]\nprotekt = [\"slurmstepd\"]\n");
  EXPECT_FALSE(load_kill_config_from(path_, true, error));
  EXPECT_NE(error.find(path_ + ":2:"), std::string::npos) << error;
  EXPECT_NE(error.find("kill.protekt"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  write("# a comment\n[Kill]\nprotect = [\"slurmstepd\"]\n");
  EXPECT_FALSE(load_kill_config_from(path_, true, error));
  EXPECT_NE(error.find("'Kill'"), std::string::npos) << error;
  EXPECT_NE(error.find(path_ + ":2:"), std::string::npos) << error;
  write("protect = [\"slurmstepd\"]\n");
  EXPECT_FALSE(load_kill_config_from(path_, true, error)) << "a key outside [kill]";
  write("kill = 3\n");
  EXPECT_FALSE(load_kill_config_from(path_, true, error));
}

TEST_F(ConfigFile, InvalidFilesAreErrorsThatNameTheProblem) {
  std::string error;
  write("[kill\nprotect = 1\n");
  EXPECT_FALSE(load_kill_config_from(path_, true, error));
  EXPECT_NE(error.find(path_ + ":1:"), std::string::npos) << error;
  write("[kill]\nprotect = \"Xorg\"\n");
  EXPECT_FALSE(load_kill_config_from(path_, true, error));
  EXPECT_NE(error.find("array"), std::string::npos) << error;
  write("[kill]\nprotect = [1]\n");
  EXPECT_FALSE(load_kill_config_from(path_, true, error));
  write("[kill]\naudit_log = 3\n");
  EXPECT_FALSE(load_kill_config_from(path_, true, error));
}

TEST(Config, MissingFileIsAnErrorOnlyWhenNamedExplicitly) {
  std::string error;
  EXPECT_TRUE(load_kill_config_from("/nonexistent/gpureap.toml", false, error));
  EXPECT_FALSE(load_kill_config_from("/nonexistent/gpureap.toml", true, error));
  EXPECT_NE(error.find("GPUREAP_CONFIG"), std::string::npos);
}

TEST(ConfigText, SameRulesAsAFileAndErrorsNameTheSource) {
  std::string error;
  const auto config = parse_kill_config("[kill]\nprotect = [\"slurmstepd\"]\n", "inline", error);
  ASSERT_TRUE(config) << error;
  EXPECT_EQ(config->protect, (std::vector<std::string>{"slurmstepd"}));
  EXPECT_EQ(config->path, "inline");
  EXPECT_FALSE(parse_kill_config("[kill\n", "inline", error));
  EXPECT_EQ(error.rfind("inline:1:", 0), 0u) << error;
  EXPECT_FALSE(parse_kill_config("[kill]\nprotect = [\"\"]\n", "inline", error));
  EXPECT_NE(error.find("non-empty"), std::string::npos) << error;
}

// Found by fuzz/kill_config_fuzz: toml++ quotes the bad input raw, so the error spanned two
// lines (and could carry escape sequences to the terminal).
TEST(ConfigText, ParseErrorIsOneLineWithControlBytesEscaped) {
  std::string error;
  EXPECT_FALSE(parse_kill_config("[kill]\naudit_log = t\n", "config.toml", error));
  EXPECT_EQ(error.rfind("config.toml:2:", 0), 0u) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  EXPECT_FALSE(parse_kill_config("[kill]\naudit_log = t\x1b[2J\n", "config.toml", error));
  EXPECT_EQ(error.find('\x1b'), std::string::npos) << error;
}

}  // namespace
}  // namespace gpureap
