#include "exporter/listen_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>

#include "text/sanitize.hpp"

namespace gpureap {

std::string ListenAddress::text() const {
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string ListenAddress::url(bool tls) const { return std::string(tls ? "https://" : "http://") + text(); }

std::optional<ListenAddress> parse_listen_address(std::string_view text, std::string& error) {
  const std::string shown = sanitize_for_terminal(text);
  const auto fail = [&](const std::string& why) {
    error = "--listen " + shown + ": " + why;
    return std::nullopt;
  };
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return fail("give HOST:PORT, such as 127.0.0.1:9874 or [::1]:9874");
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  int port = -1;
  const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 || port > 65535) {
    return fail("the port must be a number from 0 to 65535");
  }
  if (host.empty()) {
    return fail("give the address to listen on: 127.0.0.1 (this host only), or 0.0.0.0 or [::] for every interface");
  }
  ListenAddress address;
  address.port = port;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return fail("an IPv6 address goes in brackets, such as [::1]:9874");
    host = host.substr(1, host.size() - 2);
    in6_addr v6{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), &v6) != 1) return fail("not an IPv6 address");
    address.ipv6 = true;
    address.loopback = IN6_IS_ADDR_LOOPBACK(&v6);
    address.host = std::string(host);
    return address;
  }
  if (host == "localhost") host = "127.0.0.1";
  in_addr v4{};
  if (inet_pton(AF_INET, std::string(host).c_str(), &v4) != 1) {
    if (host.find(':') != std::string_view::npos) return fail("an IPv6 address goes in brackets, such as [::1]:9874");
    return fail("not an IPv4 address (names other than localhost are not resolved: give the address)");
  }
  address.loopback = (ntohl(v4.s_addr) >> 24) == 127;
  address.host = std::string(host);
  return address;
}

}  // namespace gpureap
