// fleet against a Prometheus that holds values no exporter should have sent: a NaN where a
// state belongs, an infinite byte count, an Xid stamped before the epoch; and label values as
// gpureap's exporter sends them, already sanitised. What fleet shows must be what Prometheus
// holds, honestly: the bad values named as such, never drawn as data; labels sanitised once.
#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fake_prometheus.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

CommandResult run_fleet(const std::vector<std::string>& args) {
  std::vector<std::string> argv{gpureap_binary(), "fleet"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, SpawnOptions{}, 20000);
}

TEST(FleetBadValues, NanInfAndImplausibleTimesAreReportedNotShownAsData) {
  FakePrometheus prometheus;
  prometheus.add_host("node-a:9874");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  prometheus.add_series("gpureap_gpu_lost", {{"instance", "node-a:9874"}, {"gpu", "1"}}, nan);
  prometheus.add_series("gpureap_gpu_memory_used_bytes", {{"instance", "node-a:9874"}, {"gpu", "1"}},
                        std::numeric_limits<double>::infinity());
  prometheus.add_series("gpureap_xid_last_event_timestamp_seconds", {{"instance", "node-a:9874"}, {"gpu", "0"}, {"xid", "79"}},
                        -1e308);
  prometheus.add_series("gpureap_xid_last_event_timestamp_seconds", {{"instance", "node-a:9874"}, {"gpu", "1"}, {"xid", "48"}},
                        kFakeNow + 365.0 * 86400);
  const auto r = run_fleet({"--prometheus", prometheus.url()});
  EXPECT_NE(r.out.find("bad value from Prometheus: gpureap_gpu_lost of node-a:9874 GPU 1 is nan: shown as unknown"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("bad value from Prometheus: used memory of node-a:9874 GPU 1 is inf"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bad value from Prometheus: an Xid time (Unix seconds) of node-a:9874 GPU 0 is -1e+308: not shown"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("of node-a:9874 GPU 1 is 1831536000: not shown"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Xid 79"), std::string::npos) << "no Xid drawn from an impossible time:\n" << r.out;
  EXPECT_EQ(r.out.find("Xid 48"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("d ago"), std::string::npos) << r.out;

  const auto j = run_fleet({"--prometheus", prometheus.url(), "--json"});
  const auto json = nlohmann::json::parse(j.out);
  const auto& gpus = json["hosts"][0]["gpus"];
  ASSERT_EQ(gpus.size(), 2u) << j.out;
  EXPECT_TRUE(gpus[1]["lost"].is_null()) << "a NaN is not \"not lost\": " << gpus[1].dump();
  EXPECT_EQ(gpus[0]["lost"], false);
  EXPECT_TRUE(gpus[1]["memory"]["used_bytes"].is_null()) << gpus[1].dump();
}

TEST(FleetBadValues, LabelValuesTheExporterSanitisedAreShownSanitisedOnce) {
  FakePrometheus prometheus;
  prometheus.add_host("node-a:9874");
  // As gpureap export writes a command "evil<ESC>]0;pwned<BEL> C:\tmp": sanitised, backslash doubled.
  prometheus.add_series("gpureap_process_gpu_memory_bytes",
                        {{"instance", "node-a:9874"}, {"gpu", "0"}, {"pid", "7"}, {"user", "mallory"}, {"container", ""},
                         {"command", "evil\\x1b]0;pwned\\x07 C:\\\\tmp"}},
                        1 << 30);
  const auto r = run_fleet({"--prometheus", prometheus.url()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("evil\\x1b]0;pwned\\x07 C:\\\\tmp\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\\\\x1b"), std::string::npos) << "escaped twice:\n" << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  // JSON keeps the bytes the process named itself with.
  const auto j = run_fleet({"--prometheus", prometheus.url(), "--json"});
  const auto json = nlohmann::json::parse(j.out);
  EXPECT_EQ(json["hosts"][0]["gpus"][0]["top_processes"][0]["command"], "evil\x1b]0;pwned\x07 C:\\tmp") << j.out;
}

}  // namespace
}  // namespace gpureap::test
