// gpureap-webhook: POSTs the JSON on its stdin to a URL, for `gpureap watch`. It is a program of
// its own so that gpureap itself does not load cpp-httplib and, through it, OpenSSL, zlib,
// brotli and the shared C++ runtime at every start (2.2 ms more for `gpureap --version`,
// measured): only a daemon with a webhook pays, once per event.
//
//   gpureap-webhook URL TIMEOUT_MS < event.json
//
// Exit status: 0 sent (a 2xx answer), 1 failed (a line on stderr says why), 2 usage, 3 timed out.
// Debian's libcpp-httplib is built with OpenSSL: this file is compiled with the same CPPHTTPLIB_*
// definitions (pkg-config's), so that the classes it uses have the library's layout.
#include <httplib.h>

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <string_view>

namespace {

constexpr int kSent = 0, kFailed = 1, kUsage = 2, kTimedOut = 3;
constexpr std::size_t kMaxBodyBytes = 1 << 20;

int post(const std::string& url, const std::string& body, long long timeout_ms) {
  // "http://host:port/path": the client takes scheme, host and port; the request the path.
  const auto host_start = url.find("://");
  if (host_start == std::string::npos) {
    std::cerr << "gpureap-webhook: not an http:// or https:// URL\n";
    return kUsage;
  }
  const auto path_start = url.find('/', host_start + 3);
  const std::string origin = url.substr(0, path_start);
  const std::string path = path_start == std::string::npos ? "/" : url.substr(path_start);
  httplib::Client client(origin);
  if (!client.is_valid()) {
    std::cerr << "gpureap-webhook: the URL cannot be used\n";
    return kUsage;
  }
  const auto seconds = static_cast<time_t>(timeout_ms / 1000);
  const auto micros = static_cast<time_t>((timeout_ms % 1000) * 1000);
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  client.set_write_timeout(seconds, micros);
  client.set_keep_alive(false);
  client.enable_server_certificate_verification(true);
  const httplib::Result result = client.Post(path, body, "application/json");
  if (!result) {
    const httplib::Error error = result.error();
    std::cerr << "POST " << origin << ": " << httplib::to_string(error) << "\n";
    const bool timed_out = error == httplib::Error::Read || error == httplib::Error::Write ||
                           error == httplib::Error::ConnectionTimeout;
    return timed_out ? kTimedOut : kFailed;
  }
  if (result->status >= 200 && result->status < 300) return kSent;
  std::cerr << "POST " << origin << ": HTTP " << result->status << "\n";
  return kFailed;
}

}  // namespace

int main(int argc, char** argv) {
  long long timeout_ms = 0;
  const std::string_view timeout = argc == 3 ? argv[2] : "";
  const auto [end, ec] = std::from_chars(timeout.data(), timeout.data() + timeout.size(), timeout_ms);
  if (argc != 3 || ec != std::errc() || end != timeout.data() + timeout.size() || timeout_ms <= 0 ||
      timeout_ms > 3'600'000) {
    std::cerr << "usage: gpureap-webhook URL TIMEOUT_MS < body.json\n";
    return kUsage;
  }
  std::string body;
  char buffer[8192];
  for (ssize_t n; (n = ::read(STDIN_FILENO, buffer, sizeof buffer)) > 0 && body.size() < kMaxBodyBytes;) {
    body.append(buffer, static_cast<std::size_t>(n));
  }
  return post(argv[1], body, timeout_ms);
}
