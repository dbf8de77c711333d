// What reaches the exporter from outside: the Authorization and scrape-timeout headers of any
// client that can connect, --listen, and the web-config file. None may crash it, hang it, or
// let the wrong user in.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "exporter/basic_auth.hpp"
#include "exporter/exporter.hpp"
#include "exporter/listen_address.hpp"
#include "exporter/web_config.hpp"
#include "fuzz_check.hpp"

namespace {

std::string base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const unsigned n = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (i + 1 < bytes.size() ? static_cast<unsigned char>(bytes[i + 1]) << 8 : 0u) |
                       (i + 2 < bytes.size() ? static_cast<unsigned char>(bytes[i + 2]) : 0u);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

bool one_clean_line(const std::string& text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return false;
  }
  return true;
}

void check_headers(std::string_view text) {
  // Any header: credentials without ':' in the user, or none.
  if (const auto c = gpureap::parse_basic_authorization(text)) FUZZ_CHECK(c->user.find(':') == std::string::npos);
  // Any user (without ':') and password sent properly come back exactly.
  const std::size_t split = text.find('\0');
  const std::string_view user = text.substr(0, split);
  const std::string_view password = split == std::string_view::npos ? std::string_view() : text.substr(split + 1);
  if (user.find(':') == std::string_view::npos && user.size() + password.size() < 2048) {
    const auto c = gpureap::parse_basic_authorization("Basic " + base64(std::string(user) + ":" + std::string(password)));
    FUZZ_CHECK(c && c->user == user && c->password == password);
  }
  const double wait = gpureap::scrape_wait_seconds(text);
  FUZZ_CHECK(std::isfinite(wait) && wait > 0 && wait < 3600);
}

void check_listen(std::string_view text) {
  std::string error;
  const auto address = gpureap::parse_listen_address(text, error);
  if (!address) {
    FUZZ_CHECK(one_clean_line(error));
    return;
  }
  FUZZ_CHECK(address->port >= 0 && address->port <= 65535);
  const auto again = gpureap::parse_listen_address(address->text(), error);
  FUZZ_CHECK(again && again->host == address->host && again->port == address->port &&
             again->loopback == address->loopback);
}

void check_web_config(std::string_view text) {
  std::string error;
  const auto config = gpureap::parse_web_config(text, "web.yml", "/nonexistent", error);
  if (!config) {
    FUZZ_CHECK(error.rfind("web.yml", 0) == 0);
    FUZZ_CHECK(one_clean_line(error));
    return;
  }
  for (const auto& [user, hash] : config->basic_auth_users) {
    FUZZ_CHECK(!user.empty() && user.find(':') == std::string::npos);
    FUZZ_CHECK(gpureap::bcrypt_hash_is_valid(hash));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_headers(text);
  check_listen(text);
  check_web_config(text);
  return 0;
}
