// `gpureap ps` on a host with an NVIDIA GPU (the simulator) and an AMD GPU laid out as the
// kernel shows one: a sysfs tree (GPUREAP_SYS_DIR), render and card nodes in the simulator's dev
// dir held by real processes, and the fdinfo the amdgpu driver would print for them
// (GPUREAP_FDINFO_DIR: the processes hold plain files, whose real fdinfo has no DRM keys).
#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "drm_host_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(PsDrm, MixedNvidiaAndAmdHostShowsBothEachClientOnce) {
  SimHost host({"--gpus", "1", "--memory", "80GiB"});
  auto cuda = host.start({"--alloc", "0:2GiB"});
  const std::string pci = "0000:03:00.0";
  lay_out_amd_gpu(host, pci, {{"card1", 1}, {"renderD128", 128}});
  const std::string dev = std::filesystem::canonical(host.dev_dir()).string();
  const NodeHolder trainer(dev + "/dri/renderD128", /*with_worker=*/true);
  const NodeHolder display(dev + "/dri/card1", /*with_worker=*/false);
  ASSERT_GT(trainer.fd, 0);
  ASSERT_GT(trainer.worker, 0);
  ASSERT_GT(display.fd, 0);
  const std::string fdinfo = host.state_dir() + "/fdinfo";
  const std::string amdgpu = "pos:\t0\nflags:\t02100002\npasid:\t32784\ndrm-driver:\tamdgpu\ndrm-pdev:\t" + pci +
                             "\ndrm-client-id:\t217\ndrm-memory-vram:\t2097152 KiB\ndrm-memory-gtt:\t8192 KiB\n"
                             "drm-engine-gfx:\t107322799 ns\n";
  write_file(fdinfo + "/" + std::to_string(trainer.pid) + "/fdinfo/" + std::to_string(trainer.fd), amdgpu);
  write_file(fdinfo + "/" + std::to_string(trainer.worker) + "/fdinfo/" + std::to_string(trainer.fd), amdgpu);
  const std::map<std::string, std::string> env = {{"GPUREAP_FDINFO_DIR", fdinfo}};

  int rc = -1;
  const auto ps = host.gpureap_json({"ps", "--json"}, &rc, env);
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(ps["gpus"].size(), 1u);
  EXPECT_EQ(ps["gpus"][0]["vendor"], "nvidia");
  EXPECT_EQ(ps["gpus"][0]["source"], "nvml");
  EXPECT_NE(find_process(ps, cuda.pid, 0), nullptr);
  ASSERT_EQ(ps["drm_gpus"].size(), 1u) << ps.dump(2);
  const auto& amd = ps["drm_gpus"][0];
  EXPECT_EQ(amd["vendor"], "amd");
  EXPECT_EQ(amd["source"], "drm");
  EXPECT_EQ(amd["pci_bus_id"], pci);
  EXPECT_EQ(amd["driver"], "amdgpu");
  EXPECT_EQ(amd["memory"]["total_bytes"], 17163091968u);
  EXPECT_EQ(amd["memory"]["used_bytes"], 2281701376u);
  EXPECT_EQ(amd["memory"]["clients_bytes"], 2 * GiB);  // the parent's and the worker's client, once
  ASSERT_EQ(amd["clients"].size(), 1u);
  EXPECT_EQ(amd["clients"][0]["client_id"], 217);
  EXPECT_EQ(amd["clients"][0]["pids"], nlohmann::json::array({trainer.pid, trainer.worker}));
  EXPECT_EQ(amd["clients"][0]["vram_bytes"], 2 * GiB);
  ASSERT_EQ(amd["holders_without_stats"].size(), 1u);
  EXPECT_EQ(amd["holders_without_stats"][0]["pid"], display.pid);
  EXPECT_EQ(amd["holders_without_stats"][0]["node"], "card");
  // NVIDIA's holders are NVIDIA's alone: the AMD holders are not among them.
  EXPECT_EQ(find_holder(ps, trainer.pid), nullptr);
  EXPECT_EQ(find_holder(ps, display.pid), nullptr);

  const auto table = host.gpureap({"ps"}, env);
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("amd GPU " + pci + "  amdgpu"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("VRAM 2.1 GiB used of 16.0 GiB"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(std::to_string(trainer.worker)), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(std::to_string(display.pid)), std::string::npos) << table.out;
}

}  // namespace
}  // namespace gpureap::test
