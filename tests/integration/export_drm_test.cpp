// `gpureap export` on a host with an NVIDIA GPU (the simulator) and an AMD GPU of the simulated
// DRM driver printing amdgpu's fdinfo of Linux 5.14-5.18 (no drm-client-id: its clients are told
// apart by pasid): the same per-GPU metric names for both, told apart by `vendor`, and promtool
// accepts the output.
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "drm_host_support.hpp"
#include "export_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(ExportDrm, AmdGpusAreInTheSameSeriesWithAVendorLabel) {
  SimHost host({"--gpus", "1", "--memory", "80GiB"});
  auto cuda = host.start({"--alloc", "0:2GiB"});
  const std::string pci = "0000:03:00.0";
  host.add_drm_gpu({.pci = pci, .vram_total = 17163091968u, .fdinfo = "legacy"});
  // One open file, inherited by the worker: one pasid, its 2 GiB once.
  auto trainer = host.start_drm_client({"--node", "renderD128", "--vram", "2GiB", "--gtt", "8MiB", "--workers", "1"});
  ASSERT_GT(trainer.pid, 0) << trainer.ready_line;
  ASSERT_EQ(trainer.workers.size(), 1u);
  const double used = 2 * GiB + 128 * MiB;

  const auto result = host.gpureap({"export", "--once", "--no-kernel-log"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(promtool_check(result.out, host.state_dir()), "");
  const Scrape m = parse_exposition(result.out);
  const std::map<std::string, std::string> nvidia{{"gpu", "0"}, {"vendor", "nvidia"}};
  const std::map<std::string, std::string> amd{{"gpu", pci}, {"vendor", "amd"}, {"uuid", ""}};
  EXPECT_EQ(m.value("gpureap_gpu_info", nvidia), 1);
  EXPECT_EQ(m.value("gpureap_gpu_memory_used_bytes", nvidia), 2 * GiB);
  EXPECT_EQ(m.value("gpureap_gpu_lost", nvidia), 0);
  EXPECT_EQ(m.value("gpureap_gpu_info", {{"gpu", pci}, {"vendor", "amd"}, {"pci_bus_id", pci}}), 1);
  EXPECT_EQ(m.value("gpureap_gpu_memory_total_bytes", amd), 17163091968.0);
  EXPECT_EQ(m.value("gpureap_gpu_memory_used_bytes", amd), used);
  EXPECT_EQ(m.value("gpureap_gpu_memory_free_bytes", amd), 17163091968.0 - used);
  EXPECT_EQ(m.value("gpureap_gpu_memory_unattributed_bytes", amd), used - 2 * GiB);
  EXPECT_EQ(m.value("gpureap_gpu_lost", {{"gpu", pci}, {"vendor", "amd"}}), 0);
  // What DRM does not tell is absent, never zero.
  for (const char* family : {"gpureap_gpu_utilization_ratio", "gpureap_gpu_memory_reserved_bytes",
                             "gpureap_gpu_processes", "gpureap_gpu_holders", "gpureap_gpu_temperature_celsius"}) {
    for (const auto* sample : m.all(family)) EXPECT_EQ(sample->labels.at("vendor"), "nvidia") << family;
  }
  // Every per-GPU series says its vendor.
  for (const auto& sample : m.samples) {
    if (sample.name.rfind("gpureap_gpu_", 0) == 0) {
      EXPECT_EQ(sample.labels.count("vendor"), 1u) << sample.name;
    }
  }

  // A descriptor whose stats cannot be read (a bare open: no client, no fdinfo) leaves the
  // unattributed figure unknown: absent.
  const std::string dev = std::filesystem::canonical(host.dev_dir()).string();
  const NodeHolder unread(dev + "/dri/renderD128", /*with_worker=*/false);
  ASSERT_GT(unread.fd, 0);
  host.drm_settle();
  const auto again = host.gpureap({"export", "--once", "--no-kernel-log"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const Scrape m2 = parse_exposition(again.out);
  EXPECT_EQ(m2.value("gpureap_gpu_memory_used_bytes", amd), used);
  EXPECT_EQ(m2.value("gpureap_gpu_memory_unattributed_bytes", amd), std::nullopt);
  EXPECT_EQ(m2.value("gpureap_gpu_memory_unattributed_bytes", nvidia), 0);
  (void)cuda;
}

// Per-GPU findings carry the GPU they are about: two AMD GPUs with VRAM no client explains give
// two series, each labelled with its PCI address (never gpu="" for both, merged into one), and
// a third AMD GPU whose memory its client explains gives none.
TEST(ExportDrm, EachAmdGpusFindingIsLabelledWithItsPciAddress) {
  SimHost host({"--gpus", "1"});
  const std::string first = "0000:03:00.0", second = "0000:83:00.0", clean = "0000:c1:00.0";
  host.add_drm_gpu({.pci = first, .driver_vram = 3ull << 30, .card = 1, .render = 128});
  host.add_drm_gpu({.pci = second, .driver_vram = 5ull << 30, .card = 2, .render = 129});
  host.add_drm_gpu({.pci = clean, .card = 3, .render = 130});
  auto bystander = host.start_drm_client({"--node", "renderD130", "--vram", "2GiB"});
  ASSERT_GT(bystander.pid, 0) << bystander.ready_line;

  const auto result = host.gpureap({"export", "--once", "--no-kernel-log"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const Scrape m = parse_exposition(result.out);
  std::map<std::string, double> by_gpu;
  for (const auto* sample : m.all("gpureap_doctor_finding")) {
    if (sample->labels.at("id") == "drm-memory-unexplained") by_gpu[sample->labels.at("gpu")] += sample->value;
  }
  EXPECT_EQ(by_gpu, (std::map<std::string, double>{{first, 1}, {second, 1}})) << result.out;

  // doctor's JSON names the same GPU.
  const auto doctor = host.gpureap({"doctor", "--json", "--no-kernel-log", "--settle", "0"});
  const auto report = nlohmann::json::parse(doctor.out, nullptr, false);
  ASSERT_FALSE(report.is_discarded()) << doctor.out << doctor.err;
  std::set<std::string> named;
  for (const auto& f : report["findings"]) {
    if (f["id"] == "drm-memory-unexplained") named.insert(f["gpu"].get<std::string>());
  }
  EXPECT_EQ(named, (std::set<std::string>{first, second})) << report["findings"].dump(2);
}

}  // namespace
}  // namespace gpureap::test
