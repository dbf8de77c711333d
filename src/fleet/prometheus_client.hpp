// Instant queries to the Prometheus HTTP API (GET /api/v1/query) over http or https, with
// basic auth, bounded in time and size: every answer is read into a buffer that stops at
// max_response_bytes, and all queries of one client share one deadline.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "http/http_url.hpp"
#include "fleet/query_result.hpp"
#include "http/http_client.hpp"

namespace gpureap {

struct BasicAuth {
  std::string user;
  std::string password;
};

struct PrometheusClientOptions {
  double timeout_s = 10;  // for every query of this client together, connection included
  std::optional<BasicAuth> basic_auth;
  std::string ca_file;    // https: trust this CA bundle instead of the system's
  bool insecure = false;  // https: do not verify the server's certificate
  // Of each answer, after decompression: far above a large fleet's answer and small enough to
  // parse at once (docs/performance.md, fleet).
  std::size_t max_response_bytes = 32u << 20;
};

class PrometheusClient {
 public:
  PrometheusClient(HttpUrl url, PrometheusClientOptions options);
  ~PrometheusClient();
  PrometheusClient(const PrometheusClient&) = delete;
  PrometheusClient& operator=(const PrometheusClient&) = delete;

  // `promql` evaluated at `at` (Unix seconds; the server's now when absent). Never throws for
  // what the server does: failures come back in QueryResult::failure.
  QueryResult query(const std::string& promql, std::optional<double> at = std::nullopt);

  const HttpUrl& url() const { return url_; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }

 private:
  HttpUrl url_;
  PrometheusClientOptions options_;
  std::chrono::steady_clock::time_point deadline_;
  std::unique_ptr<HttpClient> http_;
  std::string no_http_;  // why there is no session
};

}  // namespace gpureap
