// The families built on a snapshot, on the fixture /proc tree with a hand-made driver reading:
// who memory is attributed to (a container's process, a PID that names a stranger, one that
// is not here), findings that share labels, and the two collectors' hooks.
#include <cstdlib>

#include <gtest/gtest.h>

#include "fixture_snapshot.hpp"
#include "metrics/collector.hpp"
#include "metrics/snapshot_metrics.hpp"
#include "metrics/text_format.hpp"

namespace gpureap {
namespace {

constexpr double kGiB = static_cast<double>(fixture::GiB);

// The value of the one sample of `family` with exactly these labels; -1 when there is none.
double value_of(const MetricSet& metrics, const char* family, const std::vector<MetricLabel>& labels) {
  const MetricFamily* f = metrics.find(family);
  if (f == nullptr) return -1;
  for (const auto& sample : f->samples) {
    bool same = sample.labels.size() == labels.size();
    for (std::size_t i = 0; same && i < labels.size(); ++i) {
      same = sample.labels[i].name == labels[i].name && sample.labels[i].value == labels[i].value;
    }
    if (same) return sample.value;
  }
  return -1;
}

TEST(MetricsSnapshot, MemoryIsAttributedOnlyToProcessesThatAreProvablyTheGpuProcess) {
  const auto snapshot = fixture::fixture_snapshot();
  MetricSet metrics;
  add_owner_metrics(*snapshot, {.per_process = true}, metrics);
  const ProcessInfo* trainer = snapshot->table.find(200);
  const ProcessInfo* server = snapshot->table.find(401);
  ASSERT_TRUE(trainer && server && server->container);
  EXPECT_EQ(value_of(metrics, "gpureap_user_gpu_memory_bytes", {{"gpu", "0"}, {"user", trainer->user}}), 4.0 * kGiB);
  // PID 100 exists here but holds no GPU file (a mismatch), 999 does not exist: nobody's.
  EXPECT_EQ(value_of(metrics, "gpureap_user_gpu_memory_bytes", {{"gpu", "0"}, {"user", ""}}), 1.0 * kGiB);
  EXPECT_EQ(value_of(metrics, "gpureap_user_gpu_memory_bytes", {{"gpu", "1"}, {"user", ""}}), 1.0 * kGiB);
  EXPECT_EQ(value_of(metrics, "gpureap_container_gpu_memory_bytes",
                     {{"gpu", "1"}, {"runtime", "docker"}, {"container", server->container->id}, {"pod_uid", ""}}),
            2.0 * kGiB);
  EXPECT_EQ(metrics.find("gpureap_container_gpu_memory_bytes")->samples.size(), 1u) << "host processes are not a container";
  EXPECT_EQ(value_of(metrics, "gpureap_process_gpu_memory_bytes",
                     {{"gpu", "0"}, {"pid", "100"}, {"user", ""}, {"container", ""}, {"command", ""}}),
            1.0 * kGiB)
      << "never the stranger's name or command";
  EXPECT_EQ(value_of(metrics, "gpureap_process_gpu_memory_bytes",
                     {{"gpu", "0"}, {"pid", "200"}, {"user", trainer->user}, {"container", ""},
                      {"command", "python3 train.py --epochs 90"}}),
            4.0 * kGiB);
  EXPECT_EQ(metrics.find("gpureap_process_gpu_memory_bytes")->samples.size(), 4u);
}

TEST(MetricsSnapshot, WithoutPerProcessThereIsNoPerProcessFamily) {
  const auto snapshot = fixture::fixture_snapshot();
  MetricSet metrics;
  add_owner_metrics(*snapshot, {}, metrics);
  EXPECT_EQ(metrics.find("gpureap_process_gpu_memory_bytes"), nullptr);
}

TEST(MetricsSnapshot, CommandLabelsAreSanitisedAndCut) {
  EXPECT_EQ(command_label("python \x1b[2J\n\"x\"\\"), "python \\x1b[2J\\x0a\"x\"\\\\");
  const std::string long_command(300, 'a');
  const std::string label = command_label(long_command);
  EXPECT_EQ(label, std::string(127, 'a') + "…");
}

TEST(MetricsSnapshot, FindingsWithTheSameLabelsAreOneSeriesCountingThem) {
  std::vector<Finding> findings(3);
  findings[0].id = findings[1].id = FindingId::Zombie;
  findings[0].severity = findings[1].severity = Severity::Info;
  findings[2].id = FindingId::GpuLost;
  findings[2].severity = Severity::Critical;
  findings[2].gpu = 1;
  MetricSet metrics;
  add_finding_metrics(findings, metrics);
  EXPECT_EQ(value_of(metrics, "gpureap_doctor_finding", {{"id", "zombie"}, {"severity", "info"}, {"gpu", ""}}), 2);
  EXPECT_EQ(value_of(metrics, "gpureap_doctor_finding", {{"id", "gpu-lost"}, {"severity", "critical"}, {"gpu", "1"}}), 1);
  EXPECT_EQ(metrics.find("gpureap_doctor_finding")->samples.size(), 2u);
}

TEST(MetricsCollectors, AHostCollectionCarriesTheCallersFamiliesAndSurvivesNoDriver) {
  ::setenv("GPUREAP_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  HostCollectorOptions options;
  options.snapshot.proc.proc_root = std::string(GPUREAP_FIXTURE_DIR) + "/proc/tree1";
  options.kernel_log = false;
  options.extra_families = [](MetricSet& m) {
    m.family("gpureap_watch_policy_matches_total", MetricType::Counter, "Matches.").add({{"rule", "idle"}, {"action", "log"}}, 3);
  };
  std::vector<std::string> problems;
  options.on_problem = [&](const std::string& p) { problems.push_back(p); };
  HostCollector collector(options);
  const MetricSet first = collector.collect();
  const MetricSet second = collector.collect();
  EXPECT_EQ(value_of(second, "gpureap_driver_up", {}), 0);
  EXPECT_EQ(value_of(second, "gpureap_collection_errors_total", {{"source", "nvml"}}), 2);
  EXPECT_EQ(value_of(second, "gpureap_watch_policy_matches_total", {{"rule", "idle"}, {"action", "log"}}), 3);
  EXPECT_EQ(second.families().back().name, "gpureap_watch_policy_matches_total") << "after gpureap's own";
  // A fixture tree is no procfs: the holders are walked at every collection, and that is told too.
  ASSERT_EQ(problems.size(), 2u) << "each problem is told once, not per collection";
  EXPECT_NE(problems[0].find("the NVML library is not usable"), std::string::npos);
  EXPECT_NE(problems[1].find("holders found by walking /proc at every scan"), std::string::npos);
  EXPECT_EQ(value_of(second, "gpureap_holder_events_active", {}), 0);
  ::unsetenv("GPUREAP_NVML_LIBRARY");
}

TEST(MetricsCollectors, APublishedCollectorServesWhatWasPublishedLast) {
  PublishedCollector published;
  EXPECT_TRUE(published.collect().families().empty());
  MetricSet round;
  round.family("gpureap_watch_terminations_total", MetricType::Counter, "T.").add({{"reason", "idle"}, {"outcome", "exited"}}, 1);
  published.publish(round);
  EXPECT_EQ(render_text_format(published.collect()), render_text_format(round));
}

}  // namespace
}  // namespace gpureap
