// Stand-ins for a Prometheus server, for `gpureap fleet`'s tests: one that answers the HTTP
// API from canned series (http or https, optionally demanding basic auth), and one that
// answers any request with fixed raw bytes, optionally a byte at a time (a hostile or broken
// server). Both listen on 127.0.0.1, on a port the kernel picks.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace gpureap::test {

inline constexpr double kFakeNow = 1'800'000'000;

struct TlsFiles {
  std::string dir, certificate, key;
};
// A self-signed certificate for 127.0.0.1 (and localhost), made with OpenSSL in `dir`.
TlsFiles make_self_signed_certificate(const std::string& dir);

class FakePrometheus {
 public:
  // https when `tls` is given.
  explicit FakePrometheus(const TlsFiles* tls = nullptr);
  ~FakePrometheus();
  FakePrometheus(const FakePrometheus&) = delete;
  FakePrometheus& operator=(const FakePrometheus&) = delete;

  std::string url() const;
  // Every query that contains `needle` gets this series too (value at kFakeNow).
  void add_series(const std::string& needle, nlohmann::json labels, double value);
  // The usual series of one healthy host: two GPUs, a holder on GPU 0.
  void add_host(const std::string& instance);
  // Replaces the API with this handler for /api/v1/query.
  void on_query(std::function<void(const httplib::Request&, httplib::Response&)> handler);
  // Queries are refused with 401 unless they carry this user and password.
  void require_basic_auth(const std::string& user, const std::string& password);
  std::vector<std::string> queries() const;

 private:
  struct Series {
    std::string needle;
    nlohmann::json labels;
    double value;
  };
  void answer(const httplib::Request& request, httplib::Response& response);

  bool https_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::vector<Series> series_;
  std::vector<std::string> queries_;
  std::function<void(const httplib::Request&, httplib::Response&)> handler_;
  std::string authorization_;  // "Basic ..." demanded, or ""
};

class RawHttpServer {
 public:
  enum class Pace { Drip, Flood };
  // Sends `head` at once, then `more` to each connection: one byte every `interval_ms` (Drip),
  // or the whole of it again and again as fast as the client reads (Flood).
  explicit RawHttpServer(std::string head, std::string more = "", int interval_ms = 100, Pace pace = Pace::Drip);
  ~RawHttpServer();
  RawHttpServer(const RawHttpServer&) = delete;
  RawHttpServer& operator=(const RawHttpServer&) = delete;
  std::string url() const;

 private:
  void serve();
  int listen_fd_ = -1;
  int port_ = 0;
  std::string head_, drip_;
  int interval_ms_;
  Pace pace_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// `size` zero bytes, gzip-compressed (a decompression bomb: ~1000 times smaller).
std::string gzip_of_zeros(std::size_t size);

}  // namespace gpureap::test
