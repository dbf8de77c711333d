#include "fleet/prometheus_client.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "fleet/api_response.hpp"

namespace gpureap {
namespace {

using Clock = std::chrono::steady_clock;

// Of an error answer (4xx, 5xx) only the API's short JSON message is of use.
constexpr std::size_t kMaxErrorBodyBytes = 64 * 1024;

bool success(int status) { return status >= 200 && status <= 299; }

}  // namespace

PrometheusClient::PrometheusClient(HttpUrl url, PrometheusClientOptions options)
    : url_(std::move(url)),
      options_(std::move(options)),
      deadline_(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(options_.timeout_s))) {
  HttpClientConfig config;
  config.https = url_.scheme == UrlScheme::Https;
  config.host = url_.host;
  config.port = url_.port;
  if (options_.basic_auth) {
    config.basic_auth = true;
    config.user = options_.basic_auth->user;
    config.password = options_.basic_auth->password;
  }
  config.ca_file = options_.ca_file;
  config.verify_certificate = !options_.insecure;
  http_ = HttpClient::open(config, no_http_);
}

PrometheusClient::~PrometheusClient() = default;

QueryResult PrometheusClient::query(const std::string& promql, std::optional<double> at) {
  if (!http_) return query_failure(QueryFailureKind::NoHttp, no_http_);
  const auto left = deadline_ - Clock::now();
  if (left <= Clock::duration::zero()) return query_failure(QueryFailureKind::Timeout, "no time was left for the query");
  const auto left_us = std::chrono::duration_cast<std::chrono::microseconds>(left).count();

  HttpGet get;
  get.path = url_.base_path + "/api/v1/query";
  get.params = {{"query", promql},
                // The server gives up too: an expensive query must not run on after we stopped waiting.
                {"timeout", fmt::format("{:.3f}", std::max(0.001, static_cast<double>(left_us) / 1e6))}};
  if (at) get.params.emplace_back("time", fmt::format("{:.3f}", *at));
  // The call may take what is left of the whole: the module shuts the connection at its end,
  // however the server drips its answer.
  get.timeout_us = left_us;

  int status = 0;
  std::string body;
  std::string location;
  bool too_large = false;
  bool too_late = false;
  std::size_t limit = options_.max_response_bytes;
  get.on_status = [&](int code, std::string_view where) {
    status = code;
    if (!success(status)) limit = std::min(limit, kMaxErrorBodyBytes);
    location = std::string(where.substr(0, 300));
    return true;
  };
  get.on_body = [&](std::string_view piece) {
    if (Clock::now() > deadline_) {
      too_late = true;
      return false;
    }
    if (body.size() + piece.size() > limit) {
      too_large = true;
      return false;
    }
    body.append(piece);
    return true;
  };
  const gpureap_http_error error = http_->get(get);

  if (too_late) return query_failure(QueryFailureKind::Timeout, "the answer did not arrive within the timeout");
  if (too_large && !success(status)) {
    return query_failure(QueryFailureKind::ApiError, fmt::format("HTTP {} with a long body that is not the API's error", status));
  }
  if (too_large) {
    return query_failure(QueryFailureKind::BadAnswer,
                         fmt::format("the answer is larger than {} MiB: not read (is this Prometheus?)", limit >> 20));
  }
  if (error == GPUREAP_HTTP_OUT_OF_MEMORY || error == GPUREAP_HTTP_HEAD_TOO_LARGE) {
    return query_failure(QueryFailureKind::BadAnswer, http_error_text(error) + " (is this Prometheus?)");
  }
  if (error != GPUREAP_HTTP_OK) {
    if (Clock::now() >= deadline_) return query_failure(QueryFailureKind::Timeout, "no answer within the timeout");
    return query_failure(QueryFailureKind::Unreachable, http_error_text(error));
  }
  if (status == 401 || status == 403) {
    return query_failure(QueryFailureKind::Refused,
                         fmt::format("HTTP {}: the server refused {}", status,
                                     options_.basic_auth ? "the user and password" : "a request without credentials (--user)"));
  }
  if (status >= 300 && status < 400) {
    return query_failure(QueryFailureKind::ApiError,
                         fmt::format("HTTP {}: redirected to {}; give that URL instead", status,
                                     location.empty() ? std::string("(no Location)") : location));
  }
  if (status == 404) {
    return query_failure(QueryFailureKind::ApiError,
                         "HTTP 404: no Prometheus API under this URL (a path prefix missing or wrong?)");
  }
  return parse_query_response(body, status);
}

}  // namespace gpureap
