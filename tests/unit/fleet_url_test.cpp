#include "http/http_url.hpp"

#include <gtest/gtest.h>

namespace gpureap {
namespace {

HttpUrl parsed(const std::string& text) {
  std::string error;
  auto url = parse_http_url(text, error);
  EXPECT_TRUE(url) << text << ": " << error;
  return url.value_or(HttpUrl{});
}

std::string refused(const std::string& text) {
  std::string error;
  EXPECT_FALSE(parse_http_url(text, error)) << text;
  return error;
}

TEST(FleetUrl, HostPortAndPrefix) {
  auto url = parsed("http://prometheus:9090");
  EXPECT_EQ(url.scheme, UrlScheme::Http);
  EXPECT_EQ(url.host, "prometheus");
  EXPECT_EQ(url.port, 9090);
  EXPECT_EQ(url.base_path, "");
  url = parsed("HTTPS://metrics.example.org/prometheus/");
  EXPECT_EQ(url.scheme, UrlScheme::Https);
  EXPECT_EQ(url.port, 443);
  EXPECT_EQ(url.base_path, "/prometheus");
  EXPECT_EQ(url.text(), "https://metrics.example.org:443/prometheus");
  url = parsed("http://[::1]:9090/");
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.text(), "http://[::1]:9090");
  EXPECT_EQ(parsed("http://10.0.0.1").port, 80);
}

TEST(FleetUrl, CredentialsInTheUrlAreRefusedWithTheWayToGiveThem) {
  const std::string error = refused("http://admin:secret@prometheus:9090");
  EXPECT_NE(error.find("--password-file"), std::string::npos) << error;
  EXPECT_EQ(error.find("secret"), std::string::npos) << error;
}

TEST(FleetUrl, EverythingElseIsOneClearError) {
  EXPECT_NE(refused("prometheus:9090").find("http://"), std::string::npos);
  EXPECT_NE(refused("ftp://x").find("http://"), std::string::npos);
  EXPECT_NE(refused("http://x:0").find("1 to 65535"), std::string::npos);
  EXPECT_NE(refused("http://x:65536").find("1 to 65535"), std::string::npos);
  EXPECT_NE(refused("http://x:9o90").find("1 to 65535"), std::string::npos);
  EXPECT_NE(refused("http://x:").find("1 to 65535"), std::string::npos);
  EXPECT_NE(refused("http://:9090").find("no host"), std::string::npos);
  EXPECT_NE(refused("http://x/api?query=up").find("query"), std::string::npos);
  EXPECT_NE(refused("http://x/#top").find("fragment"), std::string::npos);
  EXPECT_NE(refused("http://[::1:9090").find("]"), std::string::npos);
  // A second colon made "10.0.0.1:8080" the host name, which fails only at each connection.
  EXPECT_NE(refused("http://10.0.0.1:8080:9090").find("brackets"), std::string::npos);
  EXPECT_NE(refused("http://::1").find("brackets"), std::string::npos);
  EXPECT_NE(refused("http://x\n/").find("control"), std::string::npos);
  EXPECT_NE(refused("http://x y/").find("spaces"), std::string::npos);
  EXPECT_NE(refused("http://" + std::string(3000, 'a')).find("bytes long"), std::string::npos);
}

}  // namespace
}  // namespace gpureap
