// The depth scan run before yaml-cpp on a web-config.
#include <gtest/gtest.h>

#include <string>

#include "exporter/yaml_nesting.hpp"

namespace gpureap {
namespace {

std::string repeated(const std::string& piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

TEST(YamlNesting, FlowBlockAndSequenceDepthAreCountedAndPlaced) {
  auto deep = yaml_too_deep(repeated("[", 90000) + "\n");
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->line, 1u);
  EXPECT_EQ(deep->column, 64u);  // the bracket that opens level 65 (the line itself is level 1)
  EXPECT_TRUE(yaml_too_deep("a: " + repeated("{b: ", 90000) + "\n"));
  EXPECT_TRUE(yaml_too_deep(repeated("- ", 90000) + "x\n"));
  std::string block;
  for (int i = 0; i < 100; ++i) block += std::string(static_cast<std::size_t>(i), ' ') + "k:\n";
  deep = yaml_too_deep(block);
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->line, 65u);
}

TEST(YamlNesting, AWebConfigAndLookAlikesPass) {
  EXPECT_FALSE(yaml_too_deep("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n"
                             "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n"
                             "basic_auth_users:\n  alice: $2y$10$abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012\n"));
  EXPECT_FALSE(yaml_too_deep("a: \"" + repeated("[", 1000) + "\"\n"));
  EXPECT_FALSE(yaml_too_deep("a: '" + repeated("{", 1000) + "'\n"));
  EXPECT_FALSE(yaml_too_deep("# " + repeated("[", 1000) + "\na: 1\n"));
  EXPECT_FALSE(yaml_too_deep("a: |\n  " + repeated("[", 1000) + "\n  more\nb: 1\n"));
  std::string siblings;
  for (int i = 0; i < 500; ++i) siblings += "k" + std::to_string(i) + ":\n  x: [1, {y: 2}]\n";
  EXPECT_FALSE(yaml_too_deep(siblings));
}

}  // namespace
}  // namespace gpureap
