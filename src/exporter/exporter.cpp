#include "exporter/exporter.hpp"

#include <algorithm>

#include "metrics/text_format.hpp"
#include "text/duration.hpp"

namespace gpureap {
namespace {

constexpr double kAnswerMarginSeconds = 0.5;
constexpr double kMaxScrapeTimeoutSeconds = 3600;
// Workers beyond the scrape cap: /healthz, 401 and 503 answers never wait behind scrapes.
constexpr unsigned kSpareWorkers = 4;

constexpr std::string_view kLandingPage =
    "<!DOCTYPE html>\n<html><head><title>gpureap exporter</title></head><body>\n"
    "<h1>gpureap exporter</h1>\n"
    "<p>GPU memory, who holds it, orphaned holders and Xid events, for Prometheus.</p>\n"
    "<ul><li><a href=\"metrics\">metrics</a></li><li><a href=\"healthz\">healthz</a></li></ul>\n"
    "</body></html>\n";

HttpReply text_reply(int status, std::string body) {
  return HttpReply{status, "text/plain; charset=utf-8", std::move(body), {}};
}

}  // namespace

double scrape_wait_seconds(std::string_view timeout_header) {
  double timeout = kDefaultScrapeTimeoutSeconds;
  if (const auto given = parse_duration(timeout_header, kMaxScrapeTimeoutSeconds); given && *given >= 0.001) {
    timeout = *given;
  }
  return std::max(timeout - kAnswerMarginSeconds, timeout / 2);
}

Exporter::Exporter(Collector& collector, ExporterOptions options)
    : collector_(collector), options_(std::move(options)) {
  if (options_.web.basic_auth()) auth_.emplace(options_.web.basic_auth_users);
}

Exporter::~Exporter() {
  server_.reset();
  collection_.reset();
}

bool Exporter::start(std::string& error) {
  HttpServerConfig config;
  config.host = options_.listen.host;
  config.port = options_.listen.port;
  config.cert_file = options_.web.cert_file;
  config.key_file = options_.web.key_file;
  // Requests waiting for a bcrypt turn hold a worker each: as many more, so that they never
  // keep a remembered client or a scrape waiting.
  config.worker_threads = options_.max_scrapes + kSpareWorkers + (auth_ ? auth_->most_waiting_workers() : 0);
  server_ = HttpServer::create(options_.http_module, config, [this](const HttpRequestView& r) { return handle(r); },
                               error);
  if (!server_) return false;
  options_.listen.port = server_->port();
  collection_ = std::make_unique<SharedCollection>(collector_, options_.max_age, options_.log);
  collection_->prime();
  return true;
}

bool Exporter::serve() { return server_->serve(); }

bool Exporter::stop(std::chrono::milliseconds grace) {
  if (server_) server_->stop();
  return collection_ ? collection_->stop(grace) : true;
}

AuthDecision Exporter::authorized(const HttpRequestView& request) {
  if (!auth_) return AuthDecision::kAllowed;
  return auth_->check(request.header("Authorization"), request.remote_addr);
}

HttpReply Exporter::handle(const HttpRequestView& request) {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpReply reply = text_reply(405, "only GET and HEAD\n");
    reply.headers.emplace_back("Allow", "GET, HEAD");
    return reply;
  }
  // /healthz answers without credentials: a liveness probe, it says nothing but "ok".
  if (request.path == "/healthz") return text_reply(200, "ok\n");
  if (request.path != "/metrics" && request.path != "/") return text_reply(404, "not found: try /metrics\n");
  const AuthDecision decision = authorized(request);
  if (decision == AuthDecision::kBusy) {
    ++rejected_auth_busy_;
    HttpReply reply = text_reply(429, "too many passwords to verify at once: try again\n");
    reply.headers.emplace_back("Retry-After", "1");
    return reply;
  }
  if (decision == AuthDecision::kRefused) {
    ++rejected_unauthorized_;
    HttpReply reply = text_reply(401, "unauthorized\n");
    reply.headers.emplace_back("WWW-Authenticate", "Basic realm=\"gpureap\", charset=\"UTF-8\"");
    return reply;
  }
  if (request.path == "/") return HttpReply{200, "text/html; charset=utf-8", std::string(kLandingPage), {}};
  return metrics(request);
}

HttpReply Exporter::metrics(const HttpRequestView& request) {
  if (scrapes_in_progress_.fetch_add(1) >= options_.max_scrapes) {
    --scrapes_in_progress_;
    ++rejected_too_many_;
    HttpReply reply = text_reply(503, "too many scrapes at once (--max-scrapes)\n");
    reply.headers.emplace_back("Retry-After", "1");
    return reply;
  }
  const auto wait = std::chrono::duration<double>(scrape_wait_seconds(request.header("X-Prometheus-Scrape-Timeout-Seconds")));
  const auto deadline = SharedCollection::Clock::now() + std::chrono::duration_cast<SharedCollection::Clock::duration>(wait);
  const std::optional<CollectionResult> served = collection_->get(deadline);
  --scrapes_in_progress_;
  if (!served) {
    ++rejected_timeout_;
    return text_reply(503, "no collection has finished yet: the first one is still running (a slow or hung driver)\n");
  }
  std::string body;
  body.reserve(served->text->size() + 2048);
  body += *served->text;
  body += self_metrics(&*served);
  return HttpReply{200, std::string(kTextFormatContentType), std::move(body), {}};
}

std::string Exporter::self_metrics(const CollectionResult* served) const {
  MetricSet metrics;
  if (served != nullptr) {
    metrics.family("gpureap_collection_duration_seconds", MetricType::Gauge, "How long the collection served took.")
        .add(served->duration_seconds);
    metrics.family("gpureap_collection_timestamp_seconds", MetricType::Gauge, "Unix time the collection served finished.")
        .add(served->finished_unix);
    metrics.family("gpureap_collection_stale", MetricType::Gauge,
                   "1 when no collection finished within the scrape's timeout and an older one is served.")
        .add(served->stale ? 1 : 0);
  }
  metrics.family("gpureap_collections_total", MetricType::Counter, "Collections run since the exporter started.")
      .add(static_cast<double>(collection_ ? collection_->collections() : 0));
  auto& rejected = metrics.family("gpureap_scrapes_rejected_total", MetricType::Counter,
                                  "Requests for /metrics answered with an error instead of metrics, by reason.");
  rejected.add({{"reason", "too-many"}}, static_cast<double>(rejected_too_many_.load()));
  rejected.add({{"reason", "unauthorized"}}, static_cast<double>(rejected_unauthorized_.load()));
  rejected.add({{"reason", "timeout"}}, static_cast<double>(rejected_timeout_.load()));
  rejected.add({{"reason", "auth-busy"}}, static_cast<double>(rejected_auth_busy_.load()));
  return render_text_format(metrics);
}

}  // namespace gpureap
