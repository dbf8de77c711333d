// An HTTP(S) client session through the plug-in (http_abi.hpp), loaded on first use from
// <the program's directory>/../lib/gpureap/gpureap-http.so: /usr/bin/gpureap finds
// /usr/lib/gpureap/, a build tree's src/gpureap finds its lib/gpureap/. Never from a path in
// the environment: gpureap runs as root.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/http_abi.hpp"

namespace gpureap {

struct HttpSessionConfig {
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
  long long timeout_us = 10'000'000;  // for each wait
  // false stops the transfer (the result is then GPUREAP_HTTP_CANCELED).
  std::function<bool(int status, std::string_view location)> on_status;
  std::function<bool(std::string_view piece)> on_body;
};

class HttpSession {
 public:
  // nullptr, with one phrase in `why`, when the plug-in cannot be loaded or refuses the config.
  static std::unique_ptr<HttpSession> open(const HttpSessionConfig& config, std::string& why);
  ~HttpSession();
  HttpSession(const HttpSession&) = delete;
  HttpSession& operator=(const HttpSession&) = delete;

  // GPUREAP_HTTP_OK when a response came back (its status went to on_status).
  gpureap_http_error get(const HttpGet& request);

 private:
  HttpSession() = default;
  gpureap_http_session* session_ = nullptr;
};

// "the connection failed (refused, no route, or the name does not resolve)", ...
std::string http_error_text(gpureap_http_error error);

// Where the plug-in is looked for (for messages and tests).
std::string http_plugin_path();

}  // namespace gpureap
