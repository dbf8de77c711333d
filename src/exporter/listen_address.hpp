// --listen HOST:PORT: an IPv4 address, an IPv6 address in brackets ([::1]:9874), or localhost,
// and a port (0: any free one). Names other than localhost are refused: which interface a
// name resolves to can change, and the exporter must listen exactly where it was told.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpureap {

inline constexpr std::string_view kDefaultListenAddress = "127.0.0.1:9874";

struct ListenAddress {
  std::string host;  // numeric, without brackets
  int port = 0;
  bool ipv6 = false;
  bool loopback = false;  // 127.0.0.0/8 or ::1: reachable from this host only

  std::string text() const;  // "127.0.0.1:9874", "[::1]:9874"
  std::string url(bool tls) const;  // "http://127.0.0.1:9874"
};

// nullopt with one line in `error` (the text already sanitised).
std::optional<ListenAddress> parse_listen_address(std::string_view text, std::string& error);

}  // namespace gpureap
