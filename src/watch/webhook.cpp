// The webhook through cpp-httplib's client (Debian's libcpp-httplib, built with OpenSSL: this
// file is compiled with the same CPPHTTPLIB_* definitions, which pkg-config hands over, so the
// classes it uses have the library's layout). The URL is the admin's, from the policy file.
#include <httplib.h>

#include <fmt/format.h>

#include "watch/notify_channels.hpp"

namespace gpureap {

Delivery post_webhook(const std::string& url, const std::string& json, std::chrono::milliseconds timeout) {
  // "http://host:port/path": the client takes scheme, host and port; the request the path.
  const auto host_start = url.find("://");
  if (host_start == std::string::npos) return {DeliveryOutcome::Failed, "not an http:// or https:// URL"};
  const auto path_start = url.find('/', host_start + 3);
  const std::string origin = url.substr(0, path_start);
  const std::string path = path_start == std::string::npos ? "/" : url.substr(path_start);
  httplib::Client client(origin);
  if (!client.is_valid()) return {DeliveryOutcome::Failed, "the webhook URL cannot be used"};
  const auto seconds = static_cast<time_t>(timeout.count() / 1000);
  const auto micros = static_cast<time_t>((timeout.count() % 1000) * 1000);
  client.set_connection_timeout(seconds, micros);
  client.set_read_timeout(seconds, micros);
  client.set_write_timeout(seconds, micros);
  client.set_keep_alive(false);
  client.enable_server_certificate_verification(true);
  const httplib::Result result = client.Post(path, json, "application/json");
  if (!result) {
    const httplib::Error error = result.error();
    const bool timed_out = error == httplib::Error::Read || error == httplib::Error::Write ||
                           error == httplib::Error::ConnectionTimeout;
    return {timed_out ? DeliveryOutcome::TimedOut : DeliveryOutcome::Failed,
            fmt::format("POST {}: {}", origin, httplib::to_string(error))};
  }
  if (result->status >= 200 && result->status < 300) return {DeliveryOutcome::Sent, ""};
  return {DeliveryOutcome::Failed, fmt::format("POST {}: HTTP {}", origin, result->status)};
}

}  // namespace gpureap
