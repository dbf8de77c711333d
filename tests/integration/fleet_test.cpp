// `gpureap fleet` run for real against stand-in Prometheus servers: what a person sees, what a
// script gets, and one clear line with its own status for every way a server can fail or lie.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <httplib.h>

#include "fake_prometheus.hpp"
#include "prometheus_server.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

CommandResult fleet(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {},
                    int timeout_ms = 20000) {
  std::vector<std::string> argv{gpureap_binary(), "fleet"};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnOptions options;
  options.env = env;
  return run_command(argv, options, timeout_ms);
}

bool has_control_bytes(const std::string& text) {
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
  }
  return false;
}

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/gpureap-fleet-XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::string path_;
};

TEST(Fleet, ShowsEveryHostsGpusMemoryAndTopHolder) {
  FakePrometheus prometheus;
  prometheus.add_host("node-a:9874");
  prometheus.add_host("node-b:9874");
  prometheus.add_series("gpureap_process_gpu_memory_bytes",
                        {{"instance", "node-b:9874"}, {"gpu", "0"}, {"pid", "4242"}, {"user", "bob"},
                         {"container", "docker:0123456789ab"}, {"command", "python train.py"}},
                        12.0 * (1ull << 30));
  const auto r = fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 hosts, 4 GPUs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("node-a:9874 0      12.0 GiB   80.0 GiB  15%"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("12.0 GiB  user alice"), std::string::npos) << r.out;  // node-a: per user only
  EXPECT_NE(r.out.find("12.0 GiB  bob          pid 4242     docker:0123456789ab  python train.py"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.err, "");
}

TEST(Fleet, JsonNamesHostsGpusAndHoldersWithTheirBytes) {
  FakePrometheus prometheus;
  prometheus.add_host("node-a:9874");
  int rc = -1;
  const auto r = fleet({"--prometheus", prometheus.url(), "--json"});
  rc = r.exit_code;
  ASSERT_EQ(rc, 0) << r.err;
  const auto json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["schema"], "gpureap.fleet/1");
  EXPECT_EQ(json["evaluated_at"], kFakeNow);
  ASSERT_EQ(json["hosts"].size(), 1u);
  const auto& gpu = json["hosts"][0]["gpus"][0];
  EXPECT_EQ(gpu["gpu"], "0");
  EXPECT_EQ(gpu["uuid"], "GPU-node-a:9874-0");
  EXPECT_EQ(gpu["memory"]["used_bytes"], 12ull << 30);
  EXPECT_EQ(gpu["top_users"][0]["user"], "alice");
  EXPECT_EQ(json["exit_code"], 0);
}

TEST(Fleet, HostileLabelsAndServerMessagesNeverReachTheTerminalRaw) {
  FakePrometheus prometheus;
  const std::string evil = "\x1b]0;pwned\x07\x1b[2J\r\n\xe2\x80\xae";
  prometheus.add_host("node" + evil);
  prometheus.add_series("gpureap_process_gpu_memory_bytes",
                        {{"instance", "node" + evil}, {"gpu", "0"}, {"pid", evil}, {"user", evil}, {"container", evil},
                         {"command", evil}},
                        1 << 30);
  auto r = fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(has_control_bytes(r.out)) << r.out;
  EXPECT_NE(r.out.find("node\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\x0a"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\x0a\\u202e\n"), std::string::npos) << r.out;  // the command

  prometheus.on_query([&](const httplib::Request&, httplib::Response& response) {
    response.status = 422;
    response.set_content(nlohmann::json{{"status", "error"}, {"errorType", "execution"}, {"error", "boom" + evil}}.dump(),
                         "application/json");
  });
  r = fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 21);
  EXPECT_FALSE(has_control_bytes(r.err)) << r.err;
  EXPECT_NE(r.err.find("did not run the query: HTTP 422: execution: boom\\x1b]0;pwned"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(Fleet, AHostPrometheusCannotScrapeIsListedAsDownAndTheStatusSaysSo) {
  FakePrometheus prometheus;
  prometheus.add_host("node-a:9874");
  prometheus.add_series("(up and on", {{"instance", "node-gone:9874"}}, 0);
  const auto r = fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.out.find("node-gone:9874 down: Prometheus cannot scrape its exporter"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("node-a:9874"), std::string::npos) << r.out;
}

TEST(Fleet, HostAndGpuFiltersKeepWhatTheyName) {
  FakePrometheus prometheus;
  prometheus.add_host("node-a:9874");
  prometheus.add_host("node-b:9874");
  auto r = fleet({"--prometheus", prometheus.url(), "--host", "^node-b", "--gpu", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["hosts"].size(), 1u);
  EXPECT_EQ(json["hosts"][0]["instance"], "node-b:9874");
  ASSERT_EQ(json["hosts"][0]["gpus"].size(), 1u);
  EXPECT_EQ(json["hosts"][0]["gpus"][0]["gpu"], "1");
  r = fleet({"--prometheus", prometheus.url(), "--gpu", "GPU-node-a:9874-1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json = nlohmann::json::parse(r.out);
  ASSERT_EQ(json["hosts"].size(), 1u);
  EXPECT_EQ(json["hosts"][0]["gpus"][0]["uuid"], "GPU-node-a:9874-1");

  r = fleet({"--prometheus", prometheus.url(), "--host", "^node-z"});
  EXPECT_EQ(r.exit_code, 23);
  EXPECT_NE(r.err.find("no host matches --host/--gpu"), std::string::npos) << r.err;
}

TEST(Fleet, APrometheusWithoutGpureapSeriesIsStatus23) {
  FakePrometheus prometheus;
  const auto r = fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 23);
  EXPECT_NE(r.err.find("has no gpureap series"), std::string::npos) << r.err;
}

TEST(Fleet, AnUnreachableServerIsOneLineAndStatus20) {
  int port = 0;
  {
    FakePrometheus closed;  // a port that was just free, and is closed again
    port = std::stoi(closed.url().substr(closed.url().rfind(':') + 1));
  }
  const auto r = fleet({"--prometheus", "http://127.0.0.1:" + std::to_string(port)});
  EXPECT_EQ(r.exit_code, 20);
  EXPECT_EQ(r.err, "gpureap fleet: cannot reach Prometheus at http://127.0.0.1:" + std::to_string(port) +
                       ": the connection failed (refused, no route, or the name does not resolve)\n");
}

TEST(Fleet, WhatIsNotTheApisAnswerIsStatus22) {
  FakePrometheus prometheus;
  prometheus.on_query([](const httplib::Request&, httplib::Response& response) {
    response.set_content("<html>Sign in</html>", "text/html");
  });
  auto r = fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 22);
  EXPECT_NE(r.err.find("could not be used: the answer is not JSON"), std::string::npos) << r.err;

  // An endless answer is cut at 32 MiB, never read to the end.
  prometheus.on_query([](const httplib::Request&, httplib::Response& response) {
    response.set_chunked_content_provider("application/json", [](std::size_t, httplib::DataSink& sink) {
      static const std::string block(1 << 16, '[');
      return sink.write(block.data(), block.size());
    });
  });
  r = fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 22);
  EXPECT_NE(r.err.find("larger than 32 MiB"), std::string::npos) << r.err;
}

TEST(Fleet, ACompressionBombIsCutAtTheBoundOfWhatItInflatesTo) {
  const std::string bomb = gzip_of_zeros(64u << 20);
  ASSERT_LT(bomb.size(), 1u << 20);
  RawHttpServer server("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: " +
                       std::to_string(bomb.size()) + "\r\n\r\n" + bomb);
  const auto r = fleet({"--prometheus", server.url()});
  EXPECT_EQ(r.exit_code, 22);
  EXPECT_NE(r.err.find("larger than 32 MiB"), std::string::npos) << r.err;
}

TEST(Fleet, AServerThatDripsItsAnswerIsLeftAtTheTimeout) {
  using Clock = std::chrono::steady_clock;
  // Headers a byte at a time: every read succeeds, only the deadline ends it.
  {
    RawHttpServer server("HTTP/1.1 200 OK\r\nX-Slow: ", "a", 50);
    const auto start = Clock::now();
    const auto r = fleet({"--prometheus", server.url(), "--timeout", "500ms"});
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_EQ(r.exit_code, 20) << r.err;
    EXPECT_NE(r.err.find("did not answer within 0.5s (--timeout)"), std::string::npos) << r.err;
    EXPECT_LT(seconds, 3.0);
  }
  // A body a byte at a time.
  {
    RawHttpServer server("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", " ",
                         50);
    const auto start = Clock::now();
    const auto r = fleet({"--prometheus", server.url(), "--timeout", "500ms"});
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_EQ(r.exit_code, 20) << r.err;
    EXPECT_NE(r.err.find("did not answer within 0.5s"), std::string::npos) << r.err;
    EXPECT_LT(seconds, 3.0);
  }
}

TEST(Fleet, HeadersWithoutEndAreCutAt64KiBNotAtTheTimeout) {
  // cpp-httplib bounds each header line, not their number: the module's client shuts the
  // connection once 64 KiB came before the body. Under a heap limit of the test's own, so that
  // a regression ends at the limit rather than taking a gigabyte.
  RawHttpServer flood("HTTP/1.1 200 OK\r\n", "X-Flood: " + std::string(8000, 'y') + "\r\n", 50,
                      RawHttpServer::Pace::Flood);
  std::vector<std::string> argv = {"/usr/bin/prlimit", "--data=134217728", gpureap_binary(), "fleet",
                                   "--prometheus", flood.url(), "--timeout", "60"};
  const bool asan = kUnderAddressSanitizer;
  if (asan) argv.erase(argv.begin(), argv.begin() + 2);  // AddressSanitizer maps far more than a heap limit allows
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_command(argv);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 22) << r.err;
  EXPECT_NE(r.err.find("status line and headers passed 64 KiB"), std::string::npos) << r.err;
  EXPECT_LT(seconds, 10.0);
  if (asan) GTEST_SKIP() << "under AddressSanitizer fleet sets no heap cap (its allocator maps far more than it uses)";

  // The cap itself, as the kernel holds it for a fleet waiting on a silent server.
  RawHttpServer silent("");
  TempDir dir;
  BackgroundProcess waiting({gpureap_binary(), "fleet", "--prometheus", silent.url(), "--timeout", "5"}, {},
                            dir.path() + "/fleet.log");
  // "Max data size   <soft>   <hard>   bytes"
  auto soft_data_limit = [&] {
    std::istringstream limits(read_text_file("/proc/" + std::to_string(waiting.pid()) + "/limits"));
    for (std::string line; std::getline(limits, line);) {
      if (line.rfind("Max data size", 0) == 0) {
        std::istringstream words(line.substr(13));
        std::string soft;
        words >> soft;
        return soft;
      }
    }
    return std::string();
  };
  EXPECT_TRUE(eventually([&] { return soft_data_limit() == "1073741824"; }, 5000)) << soft_data_limit();
}

TEST(Fleet, ARedirectIsReportedNotFollowed) {
  FakePrometheus prometheus;
  prometheus.on_query([](const httplib::Request&, httplib::Response& response) {
    response.set_redirect("http://elsewhere.example:9090/api/v1/query");
  });
  const auto r = fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 21);
  EXPECT_NE(r.err.find("redirected to http://elsewhere.example:9090/api/v1/query; give that URL instead"),
            std::string::npos)
      << r.err;
}

TEST(Fleet, BasicAuthTakesThePasswordFromAFileOrTheEnvironmentOnly) {
  TempDir dir;
  FakePrometheus prometheus;
  prometheus.add_host("node-a:9874");
  prometheus.require_basic_auth("grafana", "s3cret:with colon");
  const std::string good = dir.write("good", "s3cret:with colon\n");
  const std::string bad = dir.write("bad", "wrong\n");

  auto r = fleet({"--prometheus", prometheus.url(), "--user", "grafana", "--password-file", good});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = fleet({"--prometheus", prometheus.url(), "--user", "grafana"}, {{"GPUREAP_PROMETHEUS_PASSWORD", "s3cret:with colon"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  r = fleet({"--prometheus", prometheus.url(), "--user", "grafana", "--password-file", bad});
  EXPECT_EQ(r.exit_code, 21);
  EXPECT_NE(r.err.find("HTTP 401: the server refused the user and password"), std::string::npos) << r.err;
  r = fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 21);
  EXPECT_NE(r.err.find("refused a request without credentials (--user)"), std::string::npos) << r.err;

  // Usage errors, before anything is sent: the password never on the command line.
  r = fleet({"--prometheus", "http://grafana:s3cret@127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find("s3cret"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("credentials in the URL are refused"), std::string::npos) << r.err;
  r = fleet({"--prometheus", prometheus.url(), "--password", "s3cret"});
  EXPECT_EQ(r.exit_code, 2);
  r = fleet({"--prometheus", prometheus.url(), "--user", "grafana"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--user needs a password"), std::string::npos) << r.err;
  r = fleet({"--prometheus", prometheus.url(), "--password-file", good});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--password-file needs --user"), std::string::npos) << r.err;
  // A FIFO would block a plain open: refused at once.
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  r = fleet({"--prometheus", prometheus.url(), "--user", "grafana", "--password-file", fifo}, {}, 5000);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << r.err;
  r = fleet({"--prometheus", prometheus.url(), "--user", "grafana", "--password-file", dir.write("empty", "\n")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("first line is empty"), std::string::npos) << r.err;
}

TEST(Fleet, HttpsVerifiesTheServerUnlessToldNotTo) {
  TempDir dir;
  const TlsFiles tls = make_self_signed_certificate(dir.path());
  FakePrometheus prometheus(&tls);
  prometheus.add_host("node-a:9874");

  auto r = fleet({"--prometheus", prometheus.url(), "--ca-file", tls.certificate});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("node-a:9874"), std::string::npos);
  r = fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 20);
  EXPECT_NE(r.err.find("certificate was not trusted"), std::string::npos) << r.err;
  r = fleet({"--prometheus", prometheus.url(), "--insecure"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The certificate names 127.0.0.1 and localhost, not another address of this host.
  r = fleet({"--prometheus", "http" + prometheus.url().substr(5), "--insecure"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--insecure applies to https:// only"), std::string::npos) << r.err;
}

TEST(Fleet, BadOptionsAreUsageErrors) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {},
           {"--prometheus", "prometheus:9090"},
           {"--prometheus", "http://127.0.0.1:1", "--timeout", "nan"},
           {"--prometheus", "http://127.0.0.1:1", "--timeout", "0"},
           {"--prometheus", "http://127.0.0.1:1", "--timeout", "1h"},
           {"--prometheus", "http://127.0.0.1:1", "--top", "0"},
           {"--prometheus", "http://127.0.0.1:1", "--host", "(unclosed"},
           {"--prometheus", "http://127.0.0.1:1", "--gpu", ""},
           {"--prometheus", "https://127.0.0.1:1", "--ca-file", "/nonexistent/ca.pem"},
       }) {
    const auto r = fleet(args);
    EXPECT_EQ(r.exit_code, 2) << ::testing::PrintToString(args) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace gpureap::test
