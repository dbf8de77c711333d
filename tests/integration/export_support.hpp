// Helpers for the `gpureap export` tests: the exporter started in the background on a free
// port and scraped over HTTP(S); the exposition text read back by a parser of the tests' own
// and by Prometheus's (promtool); docs/metrics.md's tables read as the contract.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>

#include "sim_harness.hpp"

namespace gpureap::test {

struct ScrapedSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Scrape {
  std::vector<ScrapedSample> samples;
  std::map<std::string, std::string> types;  // family -> "gauge", "counter" (# TYPE lines)

  // The value of the one sample of `name` whose labels include these; nullopt when none
  // (a test failure when several match).
  std::optional<double> value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const;
  std::vector<const ScrapedSample*> all(const std::string& name) const;
};

// The text format as the tests read it (a parser of their own, not gpureap's writer); a line
// it cannot read fails the test.
Scrape parse_exposition(const std::string& text);

// promtool: the test fails, never skips, when it is missing (.ci/run installs it).
std::string promtool_binary();
// `promtool check metrics` on the text: "" when it passes, else what it said.
std::string promtool_check(const std::string& text, const std::string& work_dir);
// Every sample as Prometheus's own parser reads it: promtool builds a TSDB block from the
// samples (as OpenMetrics) and dumps it back.
std::vector<ScrapedSample> parsed_by_prometheus(const std::string& text, const std::string& parent_dir);

// `gpureap export ARGS --listen 127.0.0.1:0` (unless ARGS has --listen) in the background,
// as `uid` when given, stderr to a file; waits until it says where it serves.
class ExportServer {
 public:
  ExportServer(const SimHost& host, std::vector<std::string> args, bool add_listen = true,
               std::optional<uid_t> uid = std::nullopt);
  ~ExportServer();
  ExportServer(const ExportServer&) = delete;
  ExportServer& operator=(const ExportServer&) = delete;

  bool serving() const { return port_ > 0; }
  int port() const { return port_; }
  const std::string& address() const { return address_; }  // as it printed it: "127.0.0.1", "[::1]"
  std::string stderr_text() const;
  pid_t pid() const { return pid_; }

  httplib::Client client() const;  // plain HTTP to where it serves
  // GET /metrics, parsed; fails the test on anything but 200.
  Scrape scrape(const httplib::Headers& headers = {}) const;
  // SIGTERM, then its exit status (-1 when it did not exit within timeout_ms or a signal ended it).
  int stop(int timeout_ms = 10000);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int port_ = 0;
  std::string address_;
  std::string stderr_path_;
};

// A bcrypt hash (cost 4 unless told: cheap for tests) of the password, as a web-config's
// basic_auth_users holds it.
std::string bcrypt_of(const std::string& password, int cost = 4);
// A self-signed certificate for 127.0.0.1 (dir/tls.crt, dir/tls.key) and dir/web.yml naming
// them and one basic-auth user; the web.yml's path, or "" (and a test failure) when openssl failed.
std::string write_tls_web_config(const std::string& dir, const std::string& user, const std::string& password);

// The families of docs/metrics.md: name -> (type as written, label names).
struct ContractFamily {
  std::string type;
  std::vector<std::string> labels;
};
std::map<std::string, ContractFamily> metrics_contract();

}  // namespace gpureap::test
