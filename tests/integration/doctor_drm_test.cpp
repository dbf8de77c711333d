// `gpureap doctor` on an AMD GPU laid out as the kernel shows one: VRAM in use (amdgpu's
// mem_info_vram_used) beyond what its one client reports in fdinfo is found; the same GPU
// whose client explains it is not. The finding names what a reset of the GPU would end.
#include <filesystem>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "doctor_support.hpp"
#include "drm_host_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(DoctorDrm, VramNoClientExplainsIsFoundAndExplainedVramIsNot) {
  SimHost host({"--gpus", "1"});
  const std::string pci = "0000:03:00.0";
  lay_out_amd_gpu(host, pci, {{"renderD128", 128}});  // 2.125 GiB used of 16 GiB
  const std::string dev = std::filesystem::canonical(host.dev_dir()).string();
  const NodeHolder client(dev + "/dri/renderD128", /*with_worker=*/false);
  ASSERT_GT(client.fd, 0);
  const std::string fdinfo = host.state_dir() + "/fdinfo";
  const std::string path = fdinfo + "/" + std::to_string(client.pid) + "/fdinfo/" + std::to_string(client.fd);
  const auto client_reports = [&](const std::string& vram) {
    write_file(path, "drm-driver:\tamdgpu\ndrm-pdev:\t" + pci + "\ndrm-client-id:\t5\ndrm-memory-vram:\t" + vram + "\n");
  };
  const std::map<std::string, std::string> env = {{"GPUREAP_FDINFO_DIR", fdinfo}};

  client_reports("256 MiB");
  int rc = -1;
  auto report = doctor_json(host, {"--settle", "0"}, &rc, env);
  auto found = findings(report, "drm-memory-unexplained");
  ASSERT_EQ(found.size(), 1u) << report["findings"].dump(2);
  EXPECT_EQ(found[0]["severity"], "warning") << found[0].dump(2);
  EXPECT_EQ(found[0]["evidence"]["pci_bus_id"], pci);
  EXPECT_EQ(found[0]["evidence"]["vram_used_bytes"], 2281701376u);
  EXPECT_EQ(found[0]["evidence"]["clients_bytes"], 256 * MiB);
  EXPECT_EQ(found[0]["evidence"]["unexplained_bytes"], 2281701376u - 256 * MiB);
  for (const auto& remedy : found[0]["remedies"]) EXPECT_EQ(remedy["risk"], "none");
  // What a reset would end: this GPU, in no XGMI hive, and its one client's process.
  const auto& reset = found[0]["evidence"]["reset"];
  EXPECT_TRUE(reset["xgmi_hive_id"].is_null()) << reset.dump(2);
  ASSERT_EQ(reset["gpus"].size(), 1u) << reset.dump(2);
  EXPECT_EQ(reset["gpus"][0]["pci_bus_id"], pci);
  EXPECT_EQ(reset["gpus"][0]["client_pids"], nlohmann::json::array({client.pid}));

  client_reports("2 GiB");  // 128 MiB left: the driver's own use
  report = doctor_json(host, {"--settle", "0"}, &rc, env);
  EXPECT_TRUE(findings(report, "drm-memory-unexplained").empty()) << report["findings"].dump(2);
}

}  // namespace
}  // namespace gpureap::test
