// An HTTP(S) client of one server, through the HTTP module (gpureap-http.so, see
// http_module_abi.hpp), in C++ terms: a GET or a POST with callbacks for the status and the body.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/ca_file_copy.hpp"
#include "http/http_module.hpp"

namespace gpureap {

struct HttpClientConfig {
  bool https = false;
  std::string host;
  int port = 0;
  bool basic_auth = false;
  std::string user, password;
  std::string ca_file;
  bool verify_certificate = true;
};

struct HttpGet {
  std::string path;
  std::vector<std::pair<std::string, std::string>> params;
  long long timeout_us = 10'000'000;  // the whole call (GPUREAP_HTTP_DEADLINE past it)
  // Asked from another thread while the call runs; true ends it (GPUREAP_HTTP_CANCELED).
  std::function<bool()> cancelled;
  // false stops the transfer (the result is then GPUREAP_HTTP_CANCELED).
  std::function<bool(int status, std::string_view location)> on_status;
  std::function<bool(std::string_view piece)> on_body;
};

struct HttpPost {
  std::string path;  // with its query, as given
  std::string content_type = "application/json";
  std::string body;
  long long timeout_us = 10'000'000;  // the whole call (GPUREAP_HTTP_DEADLINE past it)
  std::function<bool()> cancelled;    // as in HttpGet
  std::function<bool(int status, std::string_view location)> on_status;
  std::function<bool(std::string_view piece)> on_body;
};

class HttpClient {
 public:
  // Loads the module (where gpureap is installed: http_module_candidates). nullptr, with one
  // line in `error`, when the module cannot be loaded or refuses the settings.
  static std::unique_ptr<HttpClient> open(const HttpClientConfig& config, std::string& error);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // GPUREAP_HTTP_OK when a response came back (its status went to on_status).
  gpureap_http_error get(const HttpGet& request);
  gpureap_http_error post(const HttpPost& request);

 private:
  HttpClient() = default;
  const gpureap_http_module_api* api_ = nullptr;
  void* client_ = nullptr;
  std::optional<CaFileCopy> ca_copy_;  // what the module's OpenSSL reads for config.ca_file
};

// "the connection failed (refused, no route, or the name does not resolve)", ...
std::string http_error_text(gpureap_http_error error);

}  // namespace gpureap
