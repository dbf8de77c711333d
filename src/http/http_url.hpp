// An http(s) server's URL as the HTTP client needs it: fleet's `--prometheus URL`, watch's
// webhook (its origin). Parsed by hand (no regex). Credentials in the URL are refused: a
// password typed on the command line is visible to every user in /proc/<pid>/cmdline and in
// shell history.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpureap {

enum class UrlScheme { Http, Https };

struct HttpUrl {
  UrlScheme scheme = UrlScheme::Http;
  std::string host;       // a name, an IPv4 address, or an IPv6 address without brackets
  int port = 0;           // explicit, or 80/443
  std::string base_path;  // "" or "/prometheus" (a reverse proxy's prefix), no trailing '/'

  // "http://host:port/prefix", IPv6 hosts in brackets: how messages name the server.
  std::string text() const;
};

// nullopt, with one phrase saying why in `error`, for anything but http(s)://HOST[:PORT][/PATH]
// of printable ASCII: another scheme, user:password@, a query or fragment, a port out of range.
std::optional<HttpUrl> parse_http_url(std::string_view text, std::string& error);

}  // namespace gpureap
