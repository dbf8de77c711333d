// --listen addresses and the scrape timeout a request may carry.
#include "exporter/exporter.hpp"
#include "exporter/listen_address.hpp"

#include <gtest/gtest.h>

namespace gpureap {
namespace {

TEST(ExporterListen, TheDefaultIsLoopbackOnAPortNoGpuExporterUses) {
  std::string error;
  const auto address = parse_listen_address(kDefaultListenAddress, error);
  ASSERT_TRUE(address) << error;
  EXPECT_EQ(address->host, "127.0.0.1");
  EXPECT_EQ(address->port, 9874);
  EXPECT_TRUE(address->loopback);
  for (int taken : {9400, 9835, 9445, 9100}) EXPECT_NE(address->port, taken);
  const ExporterOptions defaults;
  EXPECT_EQ(defaults.listen.text(), kDefaultListenAddress) << "watch's exporter listens there too unless told";
  EXPECT_TRUE(defaults.listen.loopback);
}

TEST(ExporterListen, AcceptsIpv4Ipv6AndLocalhost) {
  std::string error;
  auto a = parse_listen_address("0.0.0.0:9874", error);
  ASSERT_TRUE(a) << error;
  EXPECT_FALSE(a->loopback);
  a = parse_listen_address("[::1]:0", error);
  ASSERT_TRUE(a) << error;
  EXPECT_TRUE(a->ipv6);
  EXPECT_TRUE(a->loopback);
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->text(), "[::1]:0");
  a = parse_listen_address("[::]:9874", error);
  ASSERT_TRUE(a) << error;
  EXPECT_FALSE(a->loopback);
  a = parse_listen_address("localhost:1234", error);
  ASSERT_TRUE(a) << error;
  EXPECT_EQ(a->host, "127.0.0.1");
  a = parse_listen_address("127.8.9.10:1", error);
  ASSERT_TRUE(a) << error;
  EXPECT_TRUE(a->loopback) << "all of 127.0.0.0/8";
}

TEST(ExporterListen, RefusesWhatItCannotListenOnExactly) {
  const std::pair<const char*, const char*> cases[] = {
      {"9874", "HOST:PORT"},
      {":9874", "give the address"},
      {"127.0.0.1:", "port"},
      {"127.0.0.1:65536", "port"},
      {"127.0.0.1:-1", "port"},
      {"127.0.0.1:80x", "port"},
      {"example.com:9874", "not resolved"},
      {"::1:9874", "brackets"},
      {"[::1:9874", "brackets"},
      {"[fe80::zz]:1", "not an IPv6 address"},
      {"300.1.1.1:1", "not an IPv4 address"},
  };
  for (const auto& [text, why] : cases) {
    std::string error;
    EXPECT_FALSE(parse_listen_address(text, error)) << text;
    EXPECT_NE(error.find(why), std::string::npos) << text << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos);
  }
  std::string error;
  EXPECT_FALSE(parse_listen_address("\x1b[2J:1", error));
  EXPECT_EQ(error.find('\x1b'), std::string::npos) << "the address is shown sanitised";
}

TEST(ExporterScrapeTimeout, WaitsTheTimeoutPrometheusSentLessAMargin) {
  EXPECT_DOUBLE_EQ(scrape_wait_seconds("10"), 9.5);
  EXPECT_DOUBLE_EQ(scrape_wait_seconds("2.5"), 2.0);
  EXPECT_DOUBLE_EQ(scrape_wait_seconds("0.5"), 0.25) << "never less than half of it";
  EXPECT_DOUBLE_EQ(scrape_wait_seconds(""), 9.5) << "no header: Prometheus's default, 10 s";
  for (const char* hostile : {"nan", "inf", "-5", "1e300", "99999999", "10; drop", "0"}) {
    EXPECT_DOUBLE_EQ(scrape_wait_seconds(hostile), 9.5) << hostile;
  }
}

}  // namespace
}  // namespace gpureap
