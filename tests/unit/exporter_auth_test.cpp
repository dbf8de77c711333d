// Basic auth against bcrypt hashes, and the web-config file that holds them.
#include <crypt.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../basic_auth_header.hpp"
#include "exporter/basic_auth.hpp"
#include "exporter/credential_digest.hpp"
#include "exporter/web_config.hpp"

namespace gpureap {
namespace {

// A bcrypt hash of `password` made with libcrypt, cost 4 (the lowest: tests stay fast).
std::string bcrypt_hash(const std::string& password, const char* prefix = "$2y$") {
  auto data = std::make_unique<crypt_data>();
  std::memset(data.get(), 0, sizeof(crypt_data));
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn(prefix, 4, nullptr, 0, salt, sizeof(salt)) == nullptr) return {};
  const char* hash = crypt_r(password.c_str(), salt, data.get());
  return hash ? hash : "";
}

std::string basic(const std::string& user_colon_password) { return test::basic_auth_header(user_colon_password); }

TEST(ExporterBasicAuth, ParsesTheAuthorizationHeader) {
  auto c = parse_basic_authorization(basic("prometheus:s3cr:et"));
  ASSERT_TRUE(c);
  EXPECT_EQ(c->user, "prometheus");
  EXPECT_EQ(c->password, "s3cr:et") << "the password may hold ':'";
  c = parse_basic_authorization("bAsIc " + basic("a:").substr(6));
  ASSERT_TRUE(c) << "the scheme's case does not matter";
  EXPECT_EQ(c->password, "");
  for (const std::string& hostile : {std::string(""), std::string("Basic"), std::string("Bearer abc"),
                                    std::string("Basic !!!!"), std::string("Basic YWJj"),  // "abc": no ':'
                                    std::string("Basic YQ=a"), std::string("Basic ====") ,
                                    std::string("Basic ") + std::string(10000, 'A')}) {
    EXPECT_FALSE(parse_basic_authorization(hostile)) << hostile.substr(0, 40);
  }
}

TEST(ExporterBasicAuth, BcryptHashesOfEveryPrefixVerify) {
  for (const char* prefix : {"$2y$", "$2b$", "$2a$"}) {
    const std::string hash = bcrypt_hash("right horse", prefix);
    ASSERT_TRUE(bcrypt_hash_is_valid(hash)) << prefix << " " << hash;
    EXPECT_TRUE(bcrypt_verify("right horse", hash)) << prefix;
    EXPECT_FALSE(bcrypt_verify("right hors", hash)) << prefix;
    EXPECT_FALSE(bcrypt_verify("", hash)) << prefix;
  }
  // Hashes made elsewhere: the crypt_blowfish test vectors (Openwall), which htpasswd's $2y$
  // and Go's $2a$ (exporter-toolkit) match.
  EXPECT_TRUE(bcrypt_verify("U*U", "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"));
  EXPECT_TRUE(bcrypt_verify("U*U", "$2y$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"));
  EXPECT_TRUE(bcrypt_verify("U*U", "$2b$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"));
  EXPECT_TRUE(bcrypt_verify("U*U*U", "$2a$05$XXXXXXXXXXXXXXXXXXXXXOAcXxm9kjPGEMsLznoKqmqw7tc8WCx4a"));
  EXPECT_FALSE(bcrypt_verify("U*U*", "$2a$05$XXXXXXXXXXXXXXXXXXXXXOAcXxm9kjPGEMsLznoKqmqw7tc8WCx4a"));
}

TEST(ExporterBasicAuth, OnlyBcryptHashesAreAccepted) {
  EXPECT_FALSE(bcrypt_hash_is_valid("secret")) << "a plain password";
  EXPECT_FALSE(bcrypt_hash_is_valid("$6$salt$hash")) << "SHA-512 crypt";
  EXPECT_FALSE(bcrypt_hash_is_valid("$2x$10$abcdefghijklmnopqrstuu7VZsXg8d9HwYyDMTS8TLsxeUq1ixK/K"));
  EXPECT_FALSE(bcrypt_hash_is_valid("$2y$03$abcdefghijklmnopqrstuu7VZsXg8d9HwYyDMTS8TLsxeUq1ixK/K")) << "cost below 4";
  EXPECT_FALSE(bcrypt_hash_is_valid("$2y$32$abcdefghijklmnopqrstuu7VZsXg8d9HwYyDMTS8TLsxeUq1ixK/K")) << "cost above 31";
  EXPECT_FALSE(bcrypt_hash_is_valid("$2y$10$abcdefghijklmnopqrstuu7VZsXg8d9HwYyDMTS8TLsxeUq1ixK/")) << "short";
  EXPECT_FALSE(bcrypt_hash_is_valid("$2y$10$abcdefghijklmnopqrstuu7VZsXg8d9HwYyDMTS8TLsxeUq1ixK/!"));
}

TEST(ExporterBasicAuth, AllowsTheRightPasswordOnly) {
  BasicAuthenticator auth({{"prometheus", bcrypt_hash("pass word")}});
  EXPECT_TRUE(auth.allows(basic("prometheus:pass word")));
  EXPECT_TRUE(auth.allows(basic("prometheus:pass word"))) << "again, from the cache of verified passwords";
  EXPECT_FALSE(auth.allows(basic("prometheus:pass wor"))) << "a wrong password after a right one";
  EXPECT_FALSE(auth.allows(basic("Prometheus:pass word"))) << "user names are exact";
  EXPECT_FALSE(auth.allows(basic("grafana:pass word")));
  EXPECT_FALSE(auth.allows(""));
  EXPECT_TRUE(auth.allows(basic("prometheus:pass word")));
}

TEST(ExporterBasicAuth, AFloodOfOneWrongPasswordCostsOneBcryptRun) {
  BasicAuthenticator auth({{"prometheus", bcrypt_hash("right")}, {"grafana", bcrypt_hash("other")}});
  // 14 clients at once, each repeating the same wrong password: bcrypt runs once, the others
  // wait for that one outcome, find it remembered, or are turned away as the queue is full.
  std::vector<std::thread> clients;
  std::atomic<int> allowed{0};
  for (int c = 0; c < 14; ++c) {
    clients.emplace_back([&] {
      for (int i = 0; i < 20; ++i) allowed += auth.allows(basic("prometheus:wrong")) ? 1 : 0;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(allowed.load(), 0);
  EXPECT_EQ(auth.bcrypt_runs(), 1u);
  // The right password is one more run, then remembered; an unknown user costs one run per
  // distinct password, as a known one does.
  EXPECT_TRUE(auth.allows(basic("prometheus:right")));
  EXPECT_TRUE(auth.allows(basic("prometheus:right")));
  EXPECT_EQ(auth.bcrypt_runs(), 2u);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(auth.allows(basic("nobody:right")));
  EXPECT_EQ(auth.bcrypt_runs(), 3u);
  // Another user's password is not this user's: the digest covers both.
  EXPECT_FALSE(auth.allows(basic("grafana:right")));
  EXPECT_TRUE(auth.allows(basic("grafana:other")));
  EXPECT_FALSE(auth.allows(basic("prometheus:other")));
  EXPECT_EQ(auth.bcrypt_runs(), 6u);
  EXPECT_FALSE(auth.allows(basic("prometheus:wrong")));
  EXPECT_EQ(auth.bcrypt_runs(), 6u);
}

TEST(ExporterBasicAuth, AFloodOfDistinctWrongPasswordsNeverPushesOutAScraperThatPassed) {
  BasicAuthenticator auth({{"prometheus", bcrypt_hash("right")}});
  ASSERT_TRUE(auth.allows(basic("prometheus:right")));
  const auto runs = auth.bcrypt_runs();
  // More distinct wrong passwords than failures are remembered: the old ones are forgotten,
  // the success is not.
  const std::size_t flood = BasicAuthenticator::kMaxRememberedFailures + 10;
  for (std::size_t i = 0; i < flood; ++i) {
    ASSERT_FALSE(auth.allows(basic("prometheus:wrong " + std::to_string(i))));
  }
  EXPECT_EQ(auth.bcrypt_runs(), runs + flood);
  EXPECT_TRUE(auth.allows(basic("prometheus:right")));
  EXPECT_EQ(auth.bcrypt_runs(), runs + flood) << "the scraper did not wait for bcrypt";
  EXPECT_FALSE(auth.allows(basic("prometheus:wrong " + std::to_string(flood - 1))));
  EXPECT_EQ(auth.bcrypt_runs(), runs + flood) << "the latest failures are remembered";
  EXPECT_FALSE(auth.allows(basic("prometheus:wrong 0")));
  EXPECT_EQ(auth.bcrypt_runs(), runs + flood + 1) << "the oldest failure was forgotten";
}

TEST(ExporterBasicAuth, ASuccessUnusedForItsLifetimeIsVerifiedAgain) {
  BasicAuthenticator::Limits limits;
  limits.success_lifetime = std::chrono::seconds(0);
  BasicAuthenticator auth({{"prometheus", bcrypt_hash("right")}}, limits);
  EXPECT_TRUE(auth.allows(basic("prometheus:right")));
  EXPECT_TRUE(auth.allows(basic("prometheus:right")));
  EXPECT_EQ(auth.bcrypt_runs(), 2u);
  BasicAuthenticator lasting({{"prometheus", bcrypt_hash("right")}});
  EXPECT_TRUE(lasting.allows(basic("prometheus:right")));
  EXPECT_TRUE(lasting.allows(basic("prometheus:right")));
  EXPECT_EQ(lasting.bcrypt_runs(), 1u);
}

TEST(ExporterBasicAuth, SipHashMatchesTheReferenceVectors) {
  // The reference implementation's key 00..0f; messages 00, 00 01, ... (vectors.h, SipHash-2-4).
  std::uint64_t k0 = 0, k1 = 0;
  for (int i = 0; i < 8; ++i) {
    k0 |= static_cast<std::uint64_t>(i) << (8 * i);
    k1 |= static_cast<std::uint64_t>(i + 8) << (8 * i);
  }
  EXPECT_EQ(siphash24(k0, k1, ""), 0x726fdb47dd0e0e31ULL);
  EXPECT_EQ(siphash24(k0, k1, std::string("\x00", 1)), 0x74f839c593dc67fdULL);
  std::string fifteen;
  for (int i = 0; i < 15; ++i) fifteen += static_cast<char>(i);
  EXPECT_EQ(siphash24(k0, k1, fifteen), 0xa129ca6149be45e5ULL);
}

TEST(ExporterBasicAuth, ConstantTimeComparisonStillCompares) {
  EXPECT_TRUE(equal_in_constant_time("abc", "abc"));
  EXPECT_FALSE(equal_in_constant_time("abc", "abd"));
  EXPECT_FALSE(equal_in_constant_time("abc", "ab"));
  EXPECT_TRUE(equal_in_constant_time("", ""));
}

class ExporterWebConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpureap-webconfig-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    std::ofstream(dir_ + "/tls.crt") << "not checked here\n";
    std::ofstream(dir_ + "/tls.key") << "not checked here\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::optional<WebConfig> parse(const std::string& text, std::string& error) {
    return parse_web_config(text, "web.yml", dir_, error);
  }
  std::string error_of(const std::string& text) {
    std::string error;
    EXPECT_FALSE(parse(text, error)) << text;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    return error;
  }

  std::string dir_;
};

TEST_F(ExporterWebConfig, ReadsTheExporterToolkitForm) {
  const std::string hash = bcrypt_hash("pw");
  std::string error;
  const auto config = parse("# node_exporter's file works here\n"
                            "tls_server_config:\n"
                            "  cert_file: tls.crt\n"
                            "  key_file: " + dir_ + "/tls.key\n"
                            "basic_auth_users:\n"
                            "  prometheus: " + hash + "\n"
                            "  'grafana': '" + hash + "'\n",
                            error);
  ASSERT_TRUE(config) << error;
  EXPECT_TRUE(config->tls());
  EXPECT_EQ(config->cert_file, dir_ + "/tls.crt") << "relative to the file's directory";
  EXPECT_EQ(config->key_file, dir_ + "/tls.key");
  ASSERT_EQ(config->basic_auth_users.size(), 2u);
  EXPECT_EQ(config->basic_auth_users.at("prometheus"), hash);
}

TEST_F(ExporterWebConfig, AnEmptyFileMeansNeitherTlsNorAuthentication) {
  std::string error;
  for (const char* text : {"", "# nothing\n", "---\n"}) {
    const auto config = parse(text, error);
    ASSERT_TRUE(config) << error;
    EXPECT_FALSE(config->tls());
    EXPECT_FALSE(config->basic_auth());
  }
}

TEST_F(ExporterWebConfig, EachMistakeIsOneLineWithItsPosition) {
  const std::string hash = bcrypt_hash("pw");
  EXPECT_EQ(error_of("basic_auth_user:\n  a: " + hash + "\n"),
            "web.yml:1:1: unknown key basic_auth_user (known: tls_server_config, basic_auth_users); a misspelt key "
            "would silently be ignored");
  EXPECT_EQ(error_of("tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n  keyfile: x\n"),
            "web.yml:4:3: unknown key tls_server_config.keyfile (known: cert_file, key_file); a misspelt key would "
            "silently be ignored");
  EXPECT_NE(error_of("tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n  client_ca_file: ca.crt\n")
                .find("web.yml:4:3: tls_server_config.client_ca_file is not supported by gpureap"),
            std::string::npos);
  EXPECT_NE(error_of("http_server_config:\n  http2: false\n").find("is not supported by gpureap"), std::string::npos);
  EXPECT_NE(error_of("tls_server_config:\n  cert_file: tls.crt\n").find("needs both cert_file and key_file"),
            std::string::npos);
  EXPECT_NE(error_of("tls_server_config:\n  cert_file: missing.crt\n  key_file: tls.key\n")
                .find("web.yml:2:14: cert_file " + dir_ + "/missing.crt: cannot open it"),
            std::string::npos);
  EXPECT_NE(error_of("tls_server_config:\n  cert_file: /dev\n  key_file: tls.key\n").find("is not a regular file"),
            std::string::npos);
  EXPECT_NE(error_of("basic_auth_users:\n  alice: secret\n").find("web.yml:2:10: user alice: not a bcrypt hash"),
            std::string::npos);
  EXPECT_NE(error_of("basic_auth_users:\n  alice: " + hash + "\n  alice: " + hash + "\n").find("web.yml:3:3: user alice appears twice"),
            std::string::npos);
  EXPECT_NE(error_of("basic_auth_users:\n  'a:b': " + hash + "\n").find("hold no ':'"), std::string::npos);
  EXPECT_NE(error_of("basic_auth_users: [alice]\n").find("must map user names"), std::string::npos);
  EXPECT_NE(error_of("tls_server_config: [1\n").find("web.yml:2:1: not valid YAML"), std::string::npos);
  EXPECT_NE(error_of("- a\n- b\n").find("must be a mapping"), std::string::npos);
  EXPECT_NE(error_of("basic_auth_users:\n  \"\\e[2J\": x\n").find("\\x1b[2J"), std::string::npos)
      << "names are shown sanitised";
}

TEST_F(ExporterWebConfig, TheFileMustBeASmallRegularFile) {
  std::string error;
  EXPECT_FALSE(load_web_config("/dev/zero", error));
  EXPECT_NE(error.find("is not a regular file"), std::string::npos) << error;
  EXPECT_FALSE(load_web_config(dir_ + "/absent.yml", error));
  EXPECT_NE(error.find("cannot open it"), std::string::npos) << error;
  std::ofstream(dir_ + "/web.yml") << "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n";
  const auto config = load_web_config(dir_ + "/web.yml", error);
  ASSERT_TRUE(config) << error;
  EXPECT_EQ(config->cert_file, dir_ + "/tls.crt");
}

}  // namespace
}  // namespace gpureap
