// The Prometheus endpoint: /metrics from a Collector through one shared collection, /healthz,
// a landing page at /; basic auth and TLS from the web-config; a cap on concurrent scrapes.
//
//   HostCollector collector(options);          // or a PublishedCollector fed by a loop
//   Exporter exporter(collector, exporter_options);
//   if (!exporter.start(error)) ...;           // bound: exporter.address() has the port
//   std::thread server([&] { exporter.serve(); });
//   ... wait for SIGTERM ...
//   if (!exporter.stop(2s)) _exit(0);           // a collection hung in the driver
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "exporter/basic_auth.hpp"
#include "exporter/http_server.hpp"
#include "exporter/listen_address.hpp"
#include "exporter/shared_collection.hpp"
#include "exporter/web_config.hpp"
#include "metrics/collector.hpp"

namespace gpureap {

struct ExporterOptions {
  ListenAddress listen{"127.0.0.1", 9874, false, true};  // kDefaultListenAddress
  WebConfig web;
  unsigned max_scrapes = 10;  // /metrics requests served at once; more are answered 503
  // A collection younger than this is served as it is (--cache). 1 s: scrapers that ask
  // together (an HA pair of Prometheus servers, a burst of dashboards) share one collection,
  // while any scrape interval Prometheus allows (>= 1 s, 15 s by default) still sees a new one.
  std::chrono::milliseconds max_age{1000};
  std::string http_module;  // "" = where gpureap is installed (http_module_candidates)
  std::function<void(const std::string&)> log;  // problems, one line each, for stderr
};

// How long a scrape may wait for a collection: the X-Prometheus-Scrape-Timeout-Seconds it
// sent (10 s, Prometheus's default, when absent or not a number from 0.001 to 3600) less
// 0.5 s for the answer to travel, and never less than half of it.
inline constexpr double kDefaultScrapeTimeoutSeconds = 10;
double scrape_wait_seconds(std::string_view timeout_header);

class Exporter {
 public:
  Exporter(Collector& collector, ExporterOptions options);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // Loads the HTTP module, binds and listens, and starts the first collection. False with
  // one line in `error` (the address in use, TLS files refused, no module).
  bool start(std::string& error);
  const ListenAddress& address() const { return options_.listen; }  // with the port bound

  bool serve();  // until stop(); false when accepting connections failed
  // Stops serving and collecting. False when a collection is still hung in the driver after
  // `grace` (see SharedCollection::stop): exit the process then, destroying nothing.
  bool stop(std::chrono::milliseconds grace);

  // What a request gets (the HTTP module calls it on its workers; tests call it directly).
  HttpReply handle(const HttpRequestView& request);

  unsigned scrapes_in_progress() const { return scrapes_in_progress_; }
  const SharedCollection* collection() const { return collection_.get(); }

 private:
  HttpReply metrics(const HttpRequestView& request);
  std::string self_metrics(const CollectionResult* served) const;
  AuthDecision authorized(const HttpRequestView& request);

  Collector& collector_;
  ExporterOptions options_;
  std::optional<BasicAuthenticator> auth_;
  std::unique_ptr<SharedCollection> collection_;
  std::unique_ptr<HttpServer> server_;
  std::atomic<unsigned> scrapes_in_progress_{0};
  std::atomic<std::uint64_t> rejected_too_many_{0}, rejected_unauthorized_{0}, rejected_timeout_{0},
      rejected_auth_busy_{0};
};

}  // namespace gpureap
