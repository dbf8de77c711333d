// An HTTP(S) server from the HTTP module (gpureap-http.so, see http_module_abi.hpp), in C++
// terms: requests and replies as values, the handler as a std::function.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/http_module.hpp"

namespace gpureap {

struct HttpRequestView {
  std::string_view method;
  std::string_view path;
  std::string_view remote_addr;
  std::function<std::string_view(const char* name)> header;  // "" when absent
};

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

using HttpHandler = std::function<HttpReply(const HttpRequestView&)>;

struct HttpServerConfig {
  std::string host;  // numeric IPv4 or IPv6
  int port = 0;
  std::string cert_file, key_file;  // both "" for plain HTTP
  unsigned worker_threads = 4;
  unsigned io_timeout_ms = 5000;
};

class HttpServer {
 public:
  // Loads the module (module_path, or else where gpureap is installed: http_module_candidates),
  // binds and listens. nullptr with one line in `error` when it cannot.
  static std::unique_ptr<HttpServer> create(const std::string& module_path, const HttpServerConfig& config,
                                            HttpHandler handler, std::string& error);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Serves until stop(); false when accepting connections failed.
  bool serve();
  void stop();  // from any thread

 private:
  HttpServer() = default;
  static void dispatch(void* context, const gpureap_http_request* request, void* response,
                       gpureap_http_respond_fn respond);

  const gpureap_http_module_api* api_ = nullptr;
  void* server_ = nullptr;
  HttpHandler handler_;
  int port_ = 0;
};

}  // namespace gpureap
