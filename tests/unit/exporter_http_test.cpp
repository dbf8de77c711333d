// The exporter over real HTTP (the HTTP module, cpp-httplib's client): routes, the scrape cap,
// the scrape timeout a hung collection cannot stretch, basic auth.
#include "exporter/exporter.hpp"

#include <arpa/inet.h>
#include <crypt.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <stop_token>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "../loopback_socket.hpp"
#include "exporter_test_support.hpp"

namespace gpureap {
namespace {

using namespace std::chrono_literals;
using test::GateCollector;
using test::within;
using test::connect_to;

// An exporter on 127.0.0.1 (a free port), serving on a thread of its own until destroyed.
class RunningExporter {
 public:
  RunningExporter(Collector& collector, ExporterOptions options) {
    std::string error;
    options.listen = *parse_listen_address("127.0.0.1:0", error);
    options.http_module = GPUREAP_HTTP_MODULE;
    exporter_ = std::make_unique<Exporter>(collector, std::move(options));
    if (!exporter_->start(error)) throw std::runtime_error(error);
    server_ = std::thread([this] { exporter_->serve(); });
  }
  ~RunningExporter() {
    exporter_->stop(5s);
    server_.join();
  }
  Exporter& exporter() { return *exporter_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", exporter_->address().port);
    c.set_read_timeout(20, 0);
    return c;
  }

 private:
  std::unique_ptr<Exporter> exporter_;
  std::thread server_;
};

TEST(ExporterHttp, ServesMetricsHealthAndALandingPage) {
  GateCollector collector;
  RunningExporter running(collector, {});
  auto client = running.client();
  auto r = client.Get("/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r->body.find("gpureap_test_collection 1\n"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("gpureap_collection_stale 0\n"), std::string::npos);
  EXPECT_NE(r->body.find("gpureap_collections_total 1\n"), std::string::npos);
  EXPECT_NE(r->body.find("gpureap_scrapes_rejected_total{reason=\"too-many\"} 0\n"), std::string::npos);
  r = client.Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok\n");
  r = client.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("href=\"metrics\""), std::string::npos);
  r = client.Get("/metrics/../etc/passwd");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = client.Post("/metrics", "x", "text/plain");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD");
}

// SIGTERM can reach `gpureap export` after it bound and before its thread entered the accept
// loop: serve() then returns at once, and the destructor's second stop must not wait for an
// accept loop that never ran (it did, for ever: 1 clean-clone CI run in 2, under ASan).
TEST(ExporterHttp, AStopBeforeServingEndsServeAndTheDestructor) {
  GateCollector collector;
  ExporterOptions options;
  std::string error;
  options.listen = *parse_listen_address("127.0.0.1:0", error);
  options.http_module = GPUREAP_HTTP_MODULE;
  auto exporter = std::make_shared<Exporter>(collector, std::move(options));
  ASSERT_TRUE(exporter->start(error)) << error;
  // On a thread of its own, left behind should it hang, so that the test fails instead.
  auto clean = std::make_shared<std::promise<bool>>();
  std::future<bool> ended = clean->get_future();
  std::thread([exporter = std::move(exporter), clean]() mutable {
    exporter->stop(1s);
    const bool served = exporter->serve();
    exporter.reset();
    clean->set_value(served);
  }).detach();
  ASSERT_EQ(ended.wait_for(10s), std::future_status::ready) << "stop, serve and the destructor hung";
  EXPECT_TRUE(ended.get());
}

// The local port of a TCP socket, or of its peer; 0 when it is not an IPv4 socket.
int socket_port(int fd, bool peer) {
  sockaddr_in address{};
  socklen_t size = sizeof address;
  auto* raw = reinterpret_cast<sockaddr*>(&address);
  if ((peer ? getpeername(fd, raw, &size) : getsockname(fd, raw, &size)) != 0) return 0;
  return address.sin_family == AF_INET ? ntohs(address.sin_port) : 0;
}

// Reads and drops what fd receives until the peer closes it (true) or timeout_ms pass.
bool closed_by_peer_within(int fd, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd readable{fd, POLLIN, 0};
    if (poll(&readable, 1, static_cast<int>(std::max<long long>(left.count(), 0))) != 1) return false;
    const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

// httplib writes a response's headers and its body in two writes: with Nagle's algorithm the
// body waited for the scraper's delayed ACK, 40 ms on each keep-alive scrape after the first.
TEST(ExporterHttp, ItsConnectionsSendWithoutNagleDelay) {
  GateCollector collector;
  RunningExporter running(collector, {});
  const int port = running.exporter().address().port;
  const int client = connect_to(port);
  ASSERT_GE(client, 0);
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n";
  ASSERT_EQ(write(client, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  char answer[64];
  ASSERT_GT(read(client, answer, sizeof answer), 0) << "the server accepted and answered";
  const int client_port = socket_port(client, false);
  // The accepted socket is in this process (the exporter serves on a thread of the test).
  int accepted = -1;
  DIR* fds = opendir("/proc/self/fd");
  ASSERT_NE(fds, nullptr);
  while (const dirent* entry = readdir(fds)) {
    const int fd = std::atoi(entry->d_name);
    struct stat st {};
    if (fd == client || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (socket_port(fd, false) == port && socket_port(fd, true) == client_port) accepted = fd;
  }
  closedir(fds);
  ASSERT_GE(accepted, 0) << "the server's end of the connection";
  int nodelay = 0;
  socklen_t size = sizeof nodelay;
  ASSERT_EQ(getsockopt(accepted, IPPROTO_TCP, TCP_NODELAY, &nodelay, &size), 0);
  EXPECT_NE(nodelay, 0);
  close(client);
}

TEST(ExporterHttp, TheScrapeTimeoutHoldsWhileTheCollectionHangsAndHealthStillAnswers) {
  GateCollector collector;
  ExporterOptions options;
  options.max_age = 0ms;
  RunningExporter running(collector, options);
  auto client = running.client();
  const auto good = client.Get("/metrics");
  ASSERT_TRUE(good);
  const std::size_t at = good->body.find("gpureap_test_collection ");
  ASSERT_NE(at, std::string::npos);
  const std::string last_good = good->body.substr(at, good->body.find('\n', at) - at + 1);
  collector.set_open(false);  // the driver hangs from now on
  const auto asked = std::chrono::steady_clock::now();
  const auto r = client.Get("/metrics", {{"X-Prometheus-Scrape-Timeout-Seconds", "1"}});
  const auto took = std::chrono::steady_clock::now() - asked;
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("gpureap_collection_stale 1\n"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find(last_good), std::string::npos) << "the last good collection";
  EXPECT_GE(took, 450ms) << "it waited for the collection as long as it could";
  EXPECT_LT(took, 1s) << "but answered within the timeout Prometheus sent";
  // Scrapes waiting on the hung collection hold no worker that /healthz needs.
  std::vector<std::future<httplib::Result>> waiting;
  for (int i = 0; i < 3; ++i) {
    waiting.push_back(std::async(std::launch::async, [&] {
      return running.client().Get("/metrics", {{"X-Prometheus-Scrape-Timeout-Seconds", "3"}});
    }));
  }
  ASSERT_TRUE(within([&] { return running.exporter().scrapes_in_progress() == 3; }));
  const auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  collector.set_open(true);
  for (auto& w : waiting) {
    const auto answer = w.get();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status, 200);
  }
}

TEST(ExporterHttp, BeyondMaxScrapesTheAnswerIs503AndCounted) {
  GateCollector collector(false);
  ExporterOptions options;
  options.max_scrapes = 2;
  RunningExporter running(collector, options);
  std::vector<std::future<httplib::Result>> waiting;
  for (int i = 0; i < 2; ++i) {
    waiting.push_back(std::async(std::launch::async, [&] { return running.client().Get("/metrics"); }));
  }
  ASSERT_TRUE(within([&] { return running.exporter().scrapes_in_progress() == 2; }));
  auto client = running.client();
  const auto third = client.Get("/metrics");
  ASSERT_TRUE(third);
  EXPECT_EQ(third->status, 503);
  EXPECT_EQ(third->get_header_value("Retry-After"), "1");
  collector.set_open(true);
  for (auto& w : waiting) {
    const auto answer = w.get();
    ASSERT_TRUE(answer);
    EXPECT_EQ(answer->status, 200);
  }
  const auto after = client.Get("/metrics");
  ASSERT_TRUE(after);
  EXPECT_NE(after->body.find("gpureap_scrapes_rejected_total{reason=\"too-many\"} 1\n"), std::string::npos);
}

TEST(ExporterHttp, NoCollectionInTimeAndNoneBeforeIs503) {
  GateCollector collector(false);
  RunningExporter running(collector, {});
  auto client = running.client();
  const auto r = client.Get("/metrics", {{"X-Prometheus-Scrape-Timeout-Seconds", "0.4"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  collector.set_open(true);
  const auto after = client.Get("/metrics");
  ASSERT_TRUE(after);
  EXPECT_NE(after->body.find("gpureap_scrapes_rejected_total{reason=\"timeout\"} 1\n"), std::string::npos);
}

TEST(ExporterHttp, BasicAuthRefusesAMissingOrWrongPassword) {
  crypt_data data;
  std::memset(&data, 0, sizeof(data));
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  ASSERT_NE(crypt_gensalt_rn("$2y$", 4, nullptr, 0, salt, sizeof(salt)), nullptr);
  ExporterOptions options;
  options.web.basic_auth_users = {{"prometheus", crypt_r("good one", salt, &data)}};
  GateCollector collector;
  RunningExporter running(collector, options);
  auto client = running.client();
  auto r = client.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Basic realm=\"gpureap\", charset=\"UTF-8\"");
  EXPECT_EQ(r->body.find("gpureap_"), std::string::npos) << "nothing of the metrics";
  client.set_basic_auth("prometheus", "bad one");
  r = client.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = client.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << "the landing page too";
  client.set_basic_auth("prometheus", "good one");
  r = client.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("gpureap_scrapes_rejected_total{reason=\"unauthorized\"} 3\n"), std::string::npos) << r->body;
  auto anonymous = running.client();
  r = anonymous.Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << "a liveness probe needs no password";
}

// Any local user can open connections and send nothing, or a request head a byte at a time:
// httplib's workers each waited for one (2 s, then a per-recv timeout), so 40 such
// connections delayed a scrape by 4 s and 1,000 made every scrape time out.
TEST(ExporterHttp, IdleAndTricklingConnectionsDelayNeitherAScrapeNorTheStop) {
  GateCollector collector;
  auto running = std::make_unique<RunningExporter>(collector, ExporterOptions{});
  const int port = running->exporter().address().port;
  // A kept-alive connection with no next request is closed at the keep-alive timeout (2 s).
  const int kept = connect_to(port);
  ASSERT_GE(kept, 0);
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
  ASSERT_EQ(send(kept, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  char answered[256];
  ASSERT_GT(recv(kept, answered, sizeof answered, 0), 0);
  const auto kept_since = std::chrono::steady_clock::now();
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    idle.push_back(connect_to(port));
    ASSERT_GE(idle.back(), 0);
  }
  std::vector<int> trickling;
  for (int i = 0; i < 5; ++i) {
    trickling.push_back(connect_to(port));
    ASSERT_GE(trickling.back(), 0);
    const std::string start = "GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: ";
    ASSERT_EQ(send(trickling.back(), start.data(), start.size(), MSG_NOSIGNAL), static_cast<ssize_t>(start.size()));
  }
  std::jthread trickler([&](const std::stop_token& stop) {  // joined even when an assertion returns
    while (!stop.stop_requested()) {
      for (const int fd : trickling) send(fd, "a", 1, MSG_NOSIGNAL);
      poll(nullptr, 0, 20);
    }
  });
  auto client = running->client();
  client.set_keep_alive(true);
  client.set_read_timeout(3, 0);
  for (int scrape = 0; scrape < 3; ++scrape) {  // on one kept-alive connection
    const auto asked = std::chrono::steady_clock::now();
    const auto r = client.Get("/metrics");
    const auto took = std::chrono::steady_clock::now() - asked;
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(took, 2s) << "scrape " << scrape << " waited behind connections that sent no request";
  }
  trickler.request_stop();
  trickler.join();
  // A trickled head, once whole, is answered.
  ASSERT_EQ(send(trickling[0], "\r\n\r\n", 4, MSG_NOSIGNAL), 4);
  pollfd answer{trickling[0], POLLIN, 0};
  ASSERT_EQ(poll(&answer, 1, 2000), 1);
  char head[16] = {};
  ASSERT_GT(recv(trickling[0], head, sizeof head - 1, 0), 0);
  EXPECT_EQ(std::string(head).substr(0, 12), "HTTP/1.1 200");
  ASSERT_TRUE(closed_by_peer_within(kept, 3000)) << "the kept-alive connection was not closed";
  EXPECT_GE(std::chrono::steady_clock::now() - kept_since, 1500ms) << "closed before its keep-alive timeout";
  close(kept);
  // The gate reads at most 16 KiB and takes no body it cannot count: the client is told. A
  // line ended by a bare LF is refused at once (it waited 5 s for a CRLF and was closed
  // unanswered), also inside a head: httplib reads the header after it, the gate did not.
  for (const auto& [sent, expected] : {std::pair{"GET / HTTP/1.1\r\nX-Big: " + std::string(17000, 'a'), "413"},
                                       std::pair{std::string("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), "400"},
                                       std::pair{std::string("GET /healthz HTTP/1.1\nHost: t\n\n"), "400"},
                                       std::pair{std::string("GET /healthz HTTP/1.1\r\nX: a\nContent-Length: 9\r\n\r\n"), "400"}}) {
    const int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(send(fd, sent.data(), sent.size(), MSG_NOSIGNAL), static_cast<ssize_t>(sent.size()));
    pollfd refused{fd, POLLIN, 0};
    ASSERT_EQ(poll(&refused, 1, 2000), 1);
    char status[16] = {};
    ASSERT_GT(recv(fd, status, sizeof status - 1, 0), 0);
    EXPECT_EQ(std::string(status).substr(0, 12), std::string("HTTP/1.1 ") + expected);
    close(fd);
  }
  const auto stopping = std::chrono::steady_clock::now();
  running.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, 2s) << "the stop waited for idle connections";
  EXPECT_TRUE(closed_by_peer_within(idle[0], 0)) << "the stop closes the connections that wait";
  for (const int fd : idle) close(fd);
  for (const int fd : trickling) close(fd);
}

}  // namespace
}  // namespace gpureap
