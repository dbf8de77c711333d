// read_fleet over canned query answers: which series make which host, GPU and holder, in which
// order, and what becomes of values that are not amounts.
#include "fleet/fleet_reader.hpp"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace gpureap {
namespace {

constexpr double kNow = 1'800'000'000;

struct Canned {
  std::string needle;  // the metric name the query must contain
  std::vector<Sample> samples;
};

Sample sample(std::map<std::string, std::string> labels, double value) { return Sample{std::move(labels), value}; }

// Answers each query with the samples of the first entry whose needle it contains, and records
// the time each query asked for.
struct FakeServer {
  std::vector<Canned> canned;
  std::vector<std::optional<double>> asked_at;
  std::optional<std::pair<std::string, QueryFailure>> fail_on;

  QueryFunction function() {
    return [this](const std::string& promql, std::optional<double> at) {
      asked_at.push_back(at);
      QueryResult result;
      if (fail_on && promql.find(fail_on->first) != std::string::npos) {
        result.failure = fail_on->second;
        return result;
      }
      if (promql == "vector(time())") {
        result.samples.push_back(sample({}, kNow));
        return result;
      }
      for (const auto& c : canned) {
        if (promql.find(c.needle) != std::string::npos) {
          result.samples = c.samples;
          break;
        }
      }
      return result;
    };
  }
};

const FleetHost& host_named(const FleetView& view, const std::string& instance) {
  for (const auto& h : view.hosts) {
    if (h.instance == instance) return h;
  }
  ADD_FAILURE() << "no host " << instance;
  static FleetHost none;
  return none;
}

TEST(FleetReader, OneRowPerHostAndGpuWithItsMemoryAndHolders) {
  FakeServer server;
  server.canned = {
      {"gpureap_gpu_info", {sample({{"instance", "b:9874"}, {"gpu", "0"}, {"uuid", "GPU-b0"}, {"name", "H100"}}, 1),
                            sample({{"instance", "a:9874"}, {"gpu", "10"}, {"uuid", "GPU-a10"}, {"name", "A100"}}, 1),
                            sample({{"instance", "a:9874"}, {"gpu", "9"}, {"uuid", "GPU-a9"}, {"name", "A100"}}, 1)}},
      {"gpureap_gpu_memory_total_bytes", {sample({{"instance", "a:9874"}, {"gpu", "9"}}, 80e9)}},
      {"gpureap_gpu_memory_used_bytes", {sample({{"instance", "a:9874"}, {"gpu", "9"}}, 60e9)}},
      {"gpureap_gpu_memory_unattributed_bytes", {sample({{"instance", "a:9874"}, {"gpu", "9"}}, 2e9)}},
      {"gpureap_gpu_orphaned_holders", {sample({{"instance", "a:9874"}, {"gpu", "9"}}, 2)}},
      {"gpureap_gpu_orphaned_memory_bytes", {sample({{"instance", "a:9874"}, {"gpu", "9"}}, 4e9)}},
      {"gpureap_gpu_lost", {sample({{"instance", "b:9874"}, {"gpu", "0"}}, 1)}},
      {"gpureap_process_gpu_memory_bytes",
       {sample({{"instance", "a:9874"}, {"gpu", "9"}, {"pid", "7"}, {"user", "bob"}, {"command", "small"}}, 1e9),
        sample({{"instance", "a:9874"}, {"gpu", "9"}, {"pid", "5"}, {"user", "alice"}, {"container", "docker:c1"},
                {"command", "big"}},
               50e9),
        sample({{"instance", "a:9874"}, {"gpu", "9"}, {"pid", "6"}, {"user", "idle"}, {"command", "none"}}, 0)}},
      {"gpureap_user_gpu_memory_bytes", {sample({{"instance", "a:9874"}, {"gpu", "9"}, {"user", "alice"}}, 50e9)}},
      {"gpureap_xid_last_event_timestamp_seconds",
       {sample({{"instance", "a:9874"}, {"gpu", "9"}, {"xid", "79"}}, kNow - 3600),
        sample({{"instance", "b:9874"}, {"gpu", ""}, {"xid", "13"}}, kNow - 60)}},
      {"max by (instance) (gpureap_driver_up)",
       {sample({{"instance", "a:9874"}}, 1), sample({{"instance", "b:9874"}}, 0)}},
      {"max by (instance) (up and", {sample({{"instance", "a:9874"}}, 1), sample({{"instance", "gone:9874"}}, 0)}},
  };
  const FleetReadResult read = read_fleet(server.function(), 3);
  ASSERT_FALSE(read.failure);
  const FleetView& view = read.view;
  EXPECT_EQ(view.evaluated_at, kNow);
  ASSERT_EQ(view.hosts.size(), 3u);
  EXPECT_EQ(view.hosts[0].instance, "a:9874");  // sorted
  EXPECT_EQ(view.hosts[2].instance, "gone:9874");

  const FleetHost& a = host_named(view, "a:9874");
  EXPECT_EQ(a.scrape, ScrapeState::Up);
  EXPECT_EQ(a.driver_up, true);
  ASSERT_EQ(a.gpus.size(), 2u);
  EXPECT_EQ(a.gpus[0].index, "9");  // numerically before 10
  EXPECT_EQ(a.gpus[1].index, "10");
  const FleetGpu& g = a.gpus[0];
  EXPECT_EQ(g.uuid, "GPU-a9");
  EXPECT_EQ(g.name, "A100");
  EXPECT_EQ(g.total_bytes, 80'000'000'000u);
  EXPECT_EQ(g.used_bytes, 60'000'000'000u);
  EXPECT_EQ(g.unattributed_bytes, 2'000'000'000u);
  EXPECT_EQ(g.reserved_bytes, std::nullopt);
  EXPECT_EQ(g.orphaned_holders, 2u);
  EXPECT_EQ(g.orphaned_memory_bytes, 4'000'000'000u);
  ASSERT_EQ(g.top_processes.size(), 2u);  // the one holding nothing is left out
  EXPECT_EQ(g.top_processes[0].pid, "5");  // biggest first
  EXPECT_EQ(g.top_processes[0].container, "docker:c1");
  EXPECT_EQ(g.top_processes[1].user, "bob");
  ASSERT_EQ(g.top_users.size(), 1u);
  ASSERT_TRUE(g.last_xid);
  EXPECT_EQ(g.last_xid->xid, "79");
  EXPECT_FALSE(a.gpus[1].total_bytes);  // known only from its info series

  const FleetHost& b = host_named(view, "b:9874");
  EXPECT_EQ(b.scrape, ScrapeState::Unknown);
  EXPECT_EQ(b.driver_up, false);
  ASSERT_EQ(b.gpus.size(), 1u);
  EXPECT_TRUE(b.gpus[0].lost);
  ASSERT_TRUE(b.host_xid);  // no GPU label: the host's
  EXPECT_EQ(b.host_xid->xid, "13");

  const FleetHost& gone = host_named(view, "gone:9874");
  EXPECT_EQ(gone.scrape, ScrapeState::Down);
  EXPECT_TRUE(gone.gpus.empty());
}

TEST(FleetReader, EveryQueryIsEvaluatedAtTheServersOneInstant) {
  FakeServer server;
  ASSERT_FALSE(read_fleet(server.function(), 3).failure);
  ASSERT_EQ(server.asked_at.size(), fleet_queries(3).size());
  EXPECT_FALSE(server.asked_at[0]);  // vector(time()): the server's now
  for (std::size_t i = 1; i < server.asked_at.size(); ++i) EXPECT_EQ(server.asked_at[i], kNow) << i;
}

TEST(FleetReader, ValuesThatAreNotAmountsAreUnknownAndWarnedAbout) {
  FakeServer server;
  server.canned = {
      {"gpureap_gpu_memory_total_bytes", {sample({{"instance", "a"}, {"gpu", "0"}}, std::numeric_limits<double>::quiet_NaN())}},
      {"gpureap_gpu_memory_used_bytes", {sample({{"instance", "a"}, {"gpu", "0"}}, -5)}},
      {"gpureap_gpu_memory_unattributed_bytes", {sample({{"instance", "a"}, {"gpu", "0"}}, 1e30)}},
  };
  const FleetReadResult read = read_fleet(server.function(), 3);
  ASSERT_EQ(read.view.hosts.size(), 1u);
  const FleetGpu& g = read.view.hosts[0].gpus.at(0);
  EXPECT_FALSE(g.total_bytes);
  EXPECT_FALSE(g.used_bytes);
  EXPECT_FALSE(g.unattributed_bytes);
  EXPECT_EQ(read.view.warnings.size(), 3u);
}

TEST(FleetReader, TheFirstFailedQueryEndsTheReadWithItsFailure) {
  FakeServer server;
  server.canned = {{"gpureap_gpu_info", {sample({{"instance", "a"}, {"gpu", "0"}}, 1)}}};
  server.fail_on = {{"gpureap_gpu_memory_used_bytes", QueryFailure{QueryFailureKind::ApiError, "HTTP 503"}}};
  const FleetReadResult read = read_fleet(server.function(), 3);
  ASSERT_TRUE(read.failure);
  EXPECT_EQ(read.failure->message, "HTTP 503");
  EXPECT_TRUE(read.view.hosts.empty());
}

TEST(FleetReader, TheHolderCountBoundsTheServersTopk) {
  for (const std::string& q : fleet_queries(5)) {
    if (q.find("gpureap_process_gpu_memory_bytes") != std::string::npos) {
      EXPECT_NE(q.find("topk by (instance, gpu) (5,"), std::string::npos);
    }
  }
  // Out of range asks for the nearest bound, never an unbounded answer.
  FakeServer server;
  std::vector<std::string> seen;
  auto function = server.function();
  read_fleet([&](const std::string& q, std::optional<double> at) {
    seen.push_back(q);
    return function(q, at);
  }, 100000);
  bool bounded = false;
  for (const auto& q : seen) bounded = bounded || q.find("topk by (instance, gpu) (100,") != std::string::npos;
  EXPECT_TRUE(bounded);
}

}  // namespace
}  // namespace gpureap
