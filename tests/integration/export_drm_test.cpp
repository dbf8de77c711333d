// `gpureap export` on a host with an NVIDIA GPU (the simulator) and an AMD GPU laid out as the
// kernel shows one (GPUREAP_SYS_DIR, nodes held by real processes, their fdinfo under
// GPUREAP_FDINFO_DIR in amdgpu's format before 5.19): the same per-GPU metric names for both,
// told apart by `vendor`, and promtool accepts the output.
#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "drm_host_support.hpp"
#include "export_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(ExportDrm, AmdGpusAreInTheSameSeriesWithAVendorLabel) {
  SimHost host({"--gpus", "1", "--memory", "80GiB"});
  auto cuda = host.start({"--alloc", "0:2GiB"});
  const std::string pci = "0000:03:00.0";
  lay_out_amd_gpu(host, pci, {{"renderD128", 128}});
  const std::string dev = std::filesystem::canonical(host.dev_dir()).string();
  const NodeHolder trainer(dev + "/dri/renderD128", /*with_worker=*/true);
  ASSERT_GT(trainer.fd, 0);
  ASSERT_GT(trainer.worker, 0);
  const std::string fdinfo = host.state_dir() + "/fdinfo";
  // One open file, inherited by the worker: one pasid, its 2 GiB once.
  const std::string amdgpu = "pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1033\npdev:\t" + pci +
                             "\npasid:\t32771\nvram mem:\t2097152 kB\ngtt mem:\t8192 kB\ncpu mem:\t0 kB\ngfx0:\t3.7%\n";
  for (const pid_t pid : {trainer.pid, trainer.worker}) {
    write_file(fdinfo + "/" + std::to_string(pid) + "/fdinfo/" + std::to_string(trainer.fd), amdgpu);
  }
  const std::map<std::string, std::string> env = {{"GPUREAP_FDINFO_DIR", fdinfo}};

  const auto result = host.gpureap({"export", "--once", "--no-kernel-log"}, env);
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
  EXPECT_EQ(m.value("gpureap_gpu_memory_used_bytes", amd), 2281701376.0);
  EXPECT_EQ(m.value("gpureap_gpu_memory_free_bytes", amd), 17163091968.0 - 2281701376.0);
  EXPECT_EQ(m.value("gpureap_gpu_memory_unattributed_bytes", amd), 2281701376.0 - 2 * GiB);
  EXPECT_EQ(m.value("gpureap_gpu_lost", {{"gpu", pci}, {"vendor", "amd"}}), 0);
  // What DRM does not tell is absent, never zero.
  for (const char* family : {"gpureap_gpu_utilization_ratio", "gpureap_gpu_memory_reserved_bytes",
                             "gpureap_gpu_processes", "gpureap_gpu_holders", "gpureap_gpu_temperature_celsius"}) {
    for (const auto* sample : m.all(family)) EXPECT_EQ(sample->labels.at("vendor"), "nvidia") << family;
  }
  // Every per-GPU series says its vendor.
  for (const auto& sample : m.samples) {
    if (sample.name.rfind("gpureap_gpu_", 0) == 0) EXPECT_EQ(sample.labels.count("vendor"), 1u) << sample.name;
  }

  // A descriptor whose stats cannot be read leaves the unattributed figure unknown: absent.
  const NodeHolder unread(dev + "/dri/renderD128", /*with_worker=*/false);
  ASSERT_GT(unread.fd, 0);
  const auto again = host.gpureap({"export", "--once", "--no-kernel-log"}, env);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const Scrape m2 = parse_exposition(again.out);
  EXPECT_EQ(m2.value("gpureap_gpu_memory_used_bytes", amd), 2281701376.0);
  EXPECT_EQ(m2.value("gpureap_gpu_memory_unattributed_bytes", amd), std::nullopt);
  EXPECT_EQ(m2.value("gpureap_gpu_memory_unattributed_bytes", nvidia), 0);
  (void)cuda;
}

}  // namespace
}  // namespace gpureap::test
