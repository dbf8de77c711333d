#include "http/http_url.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace gpureap {
namespace {

constexpr std::size_t kMaxUrlBytes = 2048;

bool starts_with_ignoring_case(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         std::equal(prefix.begin(), prefix.end(), text.begin(),
                    [](char want, char got) { return std::tolower(static_cast<unsigned char>(got)) == want; });
}

bool printable_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

std::optional<int> parse_port(std::string_view digits) {
  if (digits.empty() || digits.size() > 5) return std::nullopt;
  int port = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + (c - '0');
  }
  if (port < 1 || port > 65535) return std::nullopt;
  return port;
}

}  // namespace

std::string HttpUrl::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return fmt::format("{}://{}{}{}:{}{}", scheme == UrlScheme::Https ? "https" : "http", v6 ? "[" : "", host,
                     v6 ? "]" : "", port, base_path);
}

std::optional<HttpUrl> parse_http_url(std::string_view text, std::string& error) {
  if (text.size() > kMaxUrlBytes) {
    error = fmt::format("the URL is {} bytes long; at most {} are accepted", text.size(), kMaxUrlBytes);
    return std::nullopt;
  }
  if (!printable_ascii(text)) {
    error = "the URL holds spaces, control characters or non-ASCII bytes (percent-encode them)";
    return std::nullopt;
  }
  HttpUrl url;
  std::string_view rest;
  if (starts_with_ignoring_case(text, "http://")) {
    url.scheme = UrlScheme::Http;
    rest = text.substr(7);
  } else if (starts_with_ignoring_case(text, "https://")) {
    url.scheme = UrlScheme::Https;
    rest = text.substr(8);
  } else {
    error = "give an http:// or https:// URL, such as http://prometheus:9090";
    return std::nullopt;
  }
  const std::size_t authority_end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, authority_end);
  std::string_view path = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos) {
    error = "credentials in the URL are refused (any user can read a command line): give --user, and the "
            "password in --password-file or GPUREAP_PROMETHEUS_PASSWORD";
    return std::nullopt;
  }
  if (path.find_first_of("?#") != std::string_view::npos) {
    error = "the URL must not have a query or a fragment: give the server's address (and path prefix) only";
    return std::nullopt;
  }
  std::string_view host = authority;
  std::string_view port_text;
  if (!host.empty() && host.front() == '[') {
    const std::size_t close = host.find(']');
    if (close == std::string_view::npos) {
      error = "an IPv6 address needs its closing ']'";
      return std::nullopt;
    }
    const std::string_view after = host.substr(close + 1);
    if (!after.empty() && after.front() != ':') {
      error = "unexpected text after the IPv6 address";
      return std::nullopt;
    }
    port_text = after.empty() ? std::string_view() : after.substr(1);
    host = host.substr(1, close - 1);
    if (after == ":") port_text = ":";  // an empty port: refused below
  } else if (const std::size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    port_text = host.substr(colon + 1);
    if (port_text.empty()) port_text = ":";
    host = host.substr(0, colon);
  }
  const bool bracketed = !authority.empty() && authority.front() == '[';
  if (!bracketed && host.find(':') != std::string_view::npos) {
    // "10.0.0.1:8080:9090" would make "10.0.0.1:8080" a host name that fails at each connection.
    error = "a host name holds no ':'; an IPv6 address goes in brackets: http://[::1]:9090";
    return std::nullopt;
  }
  if (host.empty()) {
    error = "the URL names no host";
    return std::nullopt;
  }
  url.host = std::string(host);
  if (port_text.empty()) {
    url.port = url.scheme == UrlScheme::Https ? 443 : 80;
  } else if (const auto port = parse_port(port_text)) {
    url.port = *port;
  } else {
    error = "the port must be a number from 1 to 65535";
    return std::nullopt;
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  url.base_path = std::string(path);
  return url;
}

}  // namespace gpureap
