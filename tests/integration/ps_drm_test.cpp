// `gpureap ps` on a host with an NVIDIA GPU (the simulator) and an AMD GPU of the simulated DRM
// driver (gpusim drm-add, drm-driver): real processes hold its render and card nodes, a forked
// worker shares its parent's client, and the driver writes the fdinfo amdgpu would print for
// them (GPUREAP_FDINFO_DIR) and the VRAM it would count (mem_info_vram_used).
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "drm_host_support.hpp"
#include "sim_harness.hpp"

namespace gpureap::test {
namespace {

TEST(PsDrm, MixedNvidiaAndAmdHostShowsBothEachClientOnce) {
  SimHost host({"--gpus", "1", "--memory", "80GiB"});
  auto cuda = host.start({"--alloc", "0:2GiB"});
  const std::string pci = "0000:03:00.0";
  // What a 16 GB card reports as its total; the driver keeps 128 MiB itself.
  host.add_drm_gpu({.pci = pci, .vram_total = 17163091968u});
  auto trainer = host.start_drm_client({"--node", "renderD128", "--vram", "2GiB", "--gtt", "8MiB", "--workers", "1",
                                        "--busy", "25"});
  ASSERT_GT(trainer.pid, 0) << trainer.ready_line;
  ASSERT_EQ(trainer.workers.size(), 1u);
  // A bare open of the display node: a holder, but no client the driver knows of.
  const std::string dev = std::filesystem::canonical(host.dev_dir()).string();
  const NodeHolder display(dev + "/dri/card1", /*with_worker=*/false);
  ASSERT_GT(display.fd, 0);
  host.drm_settle();

  int rc = -1;
  const auto ps = host.gpureap_json({"ps", "--json"}, &rc);
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
  EXPECT_EQ(amd["memory"]["used_bytes"], 2 * GiB + 128 * MiB);
  EXPECT_EQ(amd["memory"]["clients_bytes"], 2 * GiB);  // the parent's and the worker's client, once
  ASSERT_EQ(amd["clients"].size(), 1u) << amd.dump(2);
  EXPECT_EQ(amd["clients"][0]["client_id"], std::stoull(ready_field(trainer, "client")));
  EXPECT_EQ(amd["clients"][0]["pids"], nlohmann::json::array({trainer.pid, trainer.workers[0]}));
  EXPECT_EQ(amd["clients"][0]["vram_bytes"], 2 * GiB);
  ASSERT_EQ(amd["holders_without_stats"].size(), 1u) << amd.dump(2);
  EXPECT_EQ(amd["holders_without_stats"][0]["pid"], display.pid);
  EXPECT_EQ(amd["holders_without_stats"][0]["node"], "card");
  // NVIDIA's holders are NVIDIA's alone: the AMD holders are not among them.
  EXPECT_EQ(find_holder(ps, trainer.pid), nullptr);
  EXPECT_EQ(find_holder(ps, display.pid), nullptr);

  const auto table = host.gpureap({"ps"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("amd GPU " + pci + "  amdgpu"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("VRAM 2.1 GiB used of 16.0 GiB"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(std::to_string(trainer.workers[0])), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(std::to_string(display.pid)), std::string::npos) << table.out;
}

// A client of another user: the driver gives its fdinfo to that user alone (as the kernel lets
// only a process with ptrace access read it), and root's ps reads it.
TEST(PsDrm, AnotherUsersClientIsReadByRoot) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user's process";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host({"--gpus", "1"});
  const std::string pci = "0000:03:00.0";
  host.add_drm_gpu({.pci = pci});
  auto client = host.start_drm_client({"--node", "renderD128", "--vram", "1GiB", "--workers", "1"}, pw->pw_uid);
  ASSERT_GT(client.pid, 0) << client.ready_line;
  struct stat st {};
  const std::string dir = host.state_dir() + "/fdinfo/" + std::to_string(client.pid);
  ASSERT_EQ(::stat(dir.c_str(), &st), 0) << dir;
  EXPECT_EQ(st.st_uid, pw->pw_uid);
  EXPECT_EQ(st.st_mode & 07777, 0500u);

  const auto ps = host.ps_json();
  ASSERT_EQ(ps["drm_gpus"].size(), 1u) << ps.dump(2);
  const auto& amd = ps["drm_gpus"][0];
  ASSERT_EQ(amd["clients"].size(), 1u) << amd.dump(2);
  EXPECT_EQ(amd["clients"][0]["pids"], nlohmann::json::array({client.pid, client.workers.at(0)}));
  EXPECT_EQ(amd["memory"]["used_bytes"], 1 * GiB + 128 * MiB);
}

// ps's filters reach the AMD GPU's clients and KFD processes: --user and --pid list only the
// selected processes' clients and contexts (never every user's), --gpu takes the AMD GPU's PCI
// address (and then shows no NVIDIA GPU) or an NVIDIA index (and then no AMD GPU), and an NVIDIA
// GPU whose processes the filter leaves out says so instead of "no processes listed". Without
// root, another user's live ROCm job is "unreadable", never "holds no /dev/kfd".
TEST(PsDrm, FiltersSelectTheAmdGpusClientsAndKfdProcessesAndUnreadableIsSaid) {
  if (!running_as_root()) GTEST_SKIP() << "needs root: another user's process";
  const passwd* pw = test_user();
  ASSERT_NE(pw, nullptr);
  SimHost host({"--gpus", "1"});
  const std::string pci = "0000:03:00.0";
  host.add_drm_gpu({.pci = pci, .kfd = true});
  auto cuda = host.start({"--alloc", "0:1GiB"});
  auto roots_job = host.start_drm_client({"--node", "renderD128", "--vram", "1GiB", "--kfd"});
  auto users_job = host.start_drm_client({"--node", "renderD128", "--vram", "2GiB", "--kfd"}, pw->pw_uid);
  ASSERT_GT(roots_job.pid, 0) << roots_job.ready_line;
  ASSERT_GT(users_job.pid, 0) << users_job.ready_line;
  auto pids_of = [](const nlohmann::json& gpu, const char* list) {
    std::set<pid_t> out;
    for (const auto& entry : gpu[list]) {
      if (entry.contains("pids")) {
        for (const auto& pid : entry["pids"]) out.insert(pid.get<pid_t>());
      } else {
        out.insert(entry["pid"].get<pid_t>());
      }
    }
    return out;
  };

  const auto by_user = host.ps_json({"--user", kTestUserName});
  ASSERT_EQ(by_user["drm_gpus"].size(), 1u) << by_user.dump(2);
  EXPECT_EQ(pids_of(by_user["drm_gpus"][0], "clients"), std::set<pid_t>{users_job.pid}) << by_user["drm_gpus"].dump(2);
  EXPECT_EQ(pids_of(by_user["drm_gpus"][0], "kfd_processes"), std::set<pid_t>{users_job.pid});
  EXPECT_TRUE(by_user["processes"].empty()) << by_user["processes"].dump(2);
  const auto by_pid = host.ps_json({"--pid", std::to_string(roots_job.pid)});
  EXPECT_EQ(pids_of(by_pid["drm_gpus"][0], "kfd_processes"), std::set<pid_t>{roots_job.pid});
  EXPECT_EQ(pids_of(by_pid["drm_gpus"][0], "clients"), std::set<pid_t>{roots_job.pid});

  const auto amd_only = host.ps_json({"--gpu", pci});
  EXPECT_TRUE(amd_only["gpus"].empty()) << amd_only["gpus"].dump(2);
  EXPECT_EQ(amd_only["drm_gpus"].size(), 1u);
  const auto nvidia_only = host.ps_json({"--gpu", "0"});
  EXPECT_EQ(nvidia_only["gpus"].size(), 1u);
  EXPECT_TRUE(nvidia_only["drm_gpus"].empty()) << nvidia_only["drm_gpus"].dump(2);

  const auto table = host.gpureap({"ps", "--user", kTestUserName});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("no listed process matches the selection"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find(std::to_string(cuda.pid)), std::string::npos) << table.out;

  SpawnOptions as_user;
  as_user.env = host.env();
  as_user.uid = pw->pw_uid;
  const auto unprivileged = run_command({gpureap_binary(), "ps", "--json"}, as_user);
  ASSERT_EQ(unprivileged.exit_code, 0) << unprivileged.err;
  const auto seen = nlohmann::json::parse(unprivileged.out);
  ASSERT_EQ(seen["drm_gpus"].size(), 1u) << seen.dump(2);
  std::map<pid_t, std::string> owners;
  for (const auto& k : seen["drm_gpus"][0]["kfd_processes"]) owners[k["pid"].get<pid_t>()] = k["owner"];
  EXPECT_EQ(owners[roots_job.pid], "unreadable") << seen["drm_gpus"].dump(2);
  EXPECT_EQ(owners[users_job.pid], "self") << seen["drm_gpus"].dump(2);
  const auto text = run_command({gpureap_binary(), "ps"}, as_user);
  EXPECT_NE(text.out.find("not readable without root"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace gpureap::test
