// The DRM device list from a sysfs tree laid out as the kernel lays out /sys (class/drm links
// into a PCI device's directory), and the KFD per-process directories and topology: what ps
// will show of an AMD or Intel GPU that no test machine has; and amdgpu's XGMI hives, with what a
// reset of one GPU of a hive would affect (doctor).
#include "cli/doctor/doctor_render.hpp"
#include "cli/ps/ps_drm.hpp"
#include "doctor/reset_readiness.hpp"
#include "drm/client_ledger.hpp"
#include "drm/device_sysfs.hpp"
#include "drm/kfd_process.hpp"

#include <filesystem>
#include <fstream>
#include <tuple>

#include <gtest/gtest.h>
#include <stdlib.h>

namespace gpureap::drm {
namespace {

namespace fs = std::filesystem;

class SysfsTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/gpureap-drm-sysfs-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root_ = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root_ + "/" + path).parent_path());
    std::ofstream(root_ + "/" + path) << text;
  }
  // class/drm/<node> -> devices/<pci>/drm/<node>, as the kernel links them.
  void node(const std::string& name, unsigned minor, const std::string& pci) {
    const std::string target = "devices/pci0000:00/" + pci + "/drm/" + name;
    write(target + "/dev", "226:" + std::to_string(minor) + "\n");
    fs::create_directory_symlink("../../" + target, root_ + "/class/drm/" + name);
    if (!fs::exists(root_ + "/" + target + "/device")) {
      fs::create_directory_symlink("../..", root_ + "/" + target + "/device");
    }
  }
  void device(const std::string& pci, const std::string& driver, const std::string& vendor) {
    write("devices/pci0000:00/" + pci + "/uevent", "DRIVER=" + driver + "\nPCI_CLASS=30000\nPCI_SLOT_NAME=" + pci + "\n");
    write("devices/pci0000:00/" + pci + "/vendor", vendor + "\n");
    fs::create_directories(root_ + "/class/drm");
  }
  std::string root_;
};

TEST_F(SysfsTree, DevicesByPciAddressWithNodesVendorAndVram) {
  device("0000:03:00.0", "amdgpu", "0x1002");
  write("devices/pci0000:00/0000:03:00.0/mem_info_vram_total", "17163091968\n");
  write("devices/pci0000:00/0000:03:00.0/mem_info_vram_used", "1073741824\n");
  node("card1", 1, "0000:03:00.0");
  node("renderD129", 129, "0000:03:00.0");
  device("0000:00:02.0", "i915", "0x8086");
  node("card0", 0, "0000:00:02.0");
  node("renderD128", 128, "0000:00:02.0");
  device("0000:41:00.0", "nvidia", "0x10de");  // nvidia-drm: a DRM device whose GPU NVML owns
  node("card2", 2, "0000:41:00.0");
  write("class/drm/card1-DP-1/status", "connected\n");  // a connector, not a device node
  write("class/drm/version", "drm 1.1.0 20060810\n");

  const auto devices = read_drm_devices(root_);
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[0].pci_address, "0000:00:02.0");
  EXPECT_EQ(devices[0].driver, "i915");
  EXPECT_EQ(devices[0].vendor, GpuVendor::Intel);
  EXPECT_EQ(devices[0].vram_total, std::nullopt);  // i915 has no mem_info_vram_*: unknown
  ASSERT_EQ(devices[0].nodes.size(), 2u);
  EXPECT_EQ(devices[0].node(NodeKind::Card)->minor, 0u);
  EXPECT_EQ(devices[0].node(NodeKind::Render)->minor, 128u);

  EXPECT_EQ(devices[1].pci_address, "0000:03:00.0");
  EXPECT_EQ(devices[1].driver, "amdgpu");
  EXPECT_EQ(devices[1].vendor, GpuVendor::Amd);
  EXPECT_EQ(devices[1].vendor_id, 0x1002);
  EXPECT_EQ(devices[1].vram_total, 17163091968u);
  EXPECT_EQ(devices[1].vram_used, 1073741824u);
  EXPECT_TRUE(devices[1].has_minor(129));
  EXPECT_FALSE(devices[1].has_minor(128));

  EXPECT_EQ(devices[2].vendor, GpuVendor::Nvidia);
  EXPECT_EQ(gpu_vendor_name(devices[2].vendor), "nvidia");
}

TEST_F(SysfsTree, NoDrmClassIsNoDevices) {
  EXPECT_TRUE(read_drm_devices(root_).empty());
  EXPECT_TRUE(read_drm_devices(root_ + "/missing").empty());
  EXPECT_TRUE(list_kfd_processes(root_).empty());
  EXPECT_FALSE(read_kfd_process(root_, 1234));
}

TEST_F(SysfsTree, KfdProcessesTheirVramPerGpuAndTheTopology) {
  write("class/kfd/kfd/proc/4242/pasid", "32770\n");
  write("class/kfd/kfd/proc/4242/vram_46412", "2147483648\n");
  write("class/kfd/kfd/proc/4242/vram_2151", "0\n");
  write("class/kfd/kfd/proc/4242/sdma_46412", "0\n");
  write("class/kfd/kfd/proc/4242/stats_46412/evicted_ms", "0\n");
  write("class/kfd/kfd/proc/977/pasid", "32771\n");
  write("class/kfd/kfd/proc/not-a-pid/pasid", "1\n");
  write("class/kfd/kfd/topology/nodes/0/gpu_id", "0\n");  // the CPU node
  write("class/kfd/kfd/topology/nodes/0/properties", "cpu_cores_count 16\nlocation_id 0\n");
  write("class/kfd/kfd/topology/nodes/1/gpu_id", "46412\n");
  write("class/kfd/kfd/topology/nodes/1/properties", "simd_count 240\nlocation_id 768\ndomain 0\n");
  write("class/kfd/kfd/topology/nodes/2/gpu_id", "2151\n");
  write("class/kfd/kfd/topology/nodes/2/properties", "location_id 49153\ndomain 1\n");

  EXPECT_EQ(list_kfd_processes(root_), (std::vector<pid_t>{977, 4242}));
  const auto process = read_kfd_process(root_, 4242);
  ASSERT_TRUE(process);
  EXPECT_EQ(process->pasid, 32770u);
  ASSERT_EQ(process->vram.size(), 2u);
  EXPECT_EQ(process->vram[0].gpu_id, 2151u);
  EXPECT_EQ(process->vram[0].vram_bytes, 0u);
  EXPECT_EQ(process->vram[1].gpu_id, 46412u);
  EXPECT_EQ(process->vram[1].vram_bytes, 2147483648u);

  const auto nodes = read_kfd_topology(root_);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].gpu_id, 2151u);
  EXPECT_EQ(nodes[0].pci_address, "0001:c0:00.1");  // 49153 = 0xc001: bus 0xc0, device 0, function 1
  EXPECT_EQ(nodes[1].gpu_id, 46412u);
  EXPECT_EQ(nodes[1].pci_address, "0000:03:00.0");  // 768 = bus 3
}

// Two GPUs in one XGMI hive (<device>/xgmi_hive_info/xgmi_hive_id, <device>/xgmi_device_id, as
// amdgpu_xgmi.c writes them: "%llu\n") and one in none. amdgpu resets a hive's GPUs together, so
// a reset of either hive GPU names both, each with its DRM clients and KFD processes; the GPU
// outside names itself alone.
TEST_F(SysfsTree, AnXgmiHiveIsReadAndAResetNamesEveryGpuOfItWithItsProcesses) {
  const std::string hive = "2890813429582356213";
  for (const auto& [pci, card, render, in_hive] :
       {std::tuple{"0000:03:00.0", 1u, 128u, true}, std::tuple{"0000:23:00.0", 2u, 129u, true},
        std::tuple{"0000:83:00.0", 3u, 130u, false}}) {
    device(pci, "amdgpu", "0x1002");
    node("card" + std::to_string(card), card, pci);
    node("renderD" + std::to_string(render), render, pci);
    if (in_hive) {
      write(std::string("devices/pci0000:00/") + pci + "/xgmi_hive_info/xgmi_hive_id", hive + "\n");
      write(std::string("devices/pci0000:00/") + pci + "/xgmi_device_id", std::to_string(card * 1000) + "\n");
    }
  }
  Snapshot snapshot;
  snapshot.drm.devices = read_drm_devices(root_);
  ASSERT_EQ(snapshot.drm.devices.size(), 3u);
  const auto& first = snapshot.drm.devices[0];
  const auto& second = snapshot.drm.devices[1];
  const auto& alone = snapshot.drm.devices[2];
  EXPECT_EQ(first.xgmi_hive_id, 2890813429582356213u);
  EXPECT_EQ(first.xgmi_device_id, 1000u);
  EXPECT_EQ(second.xgmi_hive_id, 2890813429582356213u);
  EXPECT_EQ(alone.xgmi_hive_id, std::nullopt);
  EXPECT_EQ(alone.xgmi_device_id, std::nullopt);
  EXPECT_EQ(reset_domain_of(snapshot.drm.devices, first).size(), 2u);
  ASSERT_EQ(reset_domain_of(snapshot.drm.devices, alone).size(), 1u);
  EXPECT_EQ(reset_domain_of(snapshot.drm.devices, alone)[0], &alone);
  // ps --json: exact, as decimal strings.
  const auto ps = drm_gpus_json(snapshot, PsFilter{});
  EXPECT_EQ(ps[0]["xgmi_hive_id"], hive);
  EXPECT_EQ(ps[0]["xgmi_device_id"], "1000");
  EXPECT_TRUE(ps[2]["xgmi_hive_id"].is_null());

  const auto amd_client = [](const char* pdev, std::uint64_t id) {
    DrmFdinfo record;
    record.driver = "amdgpu";
    record.pdev = pdev;
    record.client_id = id;
    return record;
  };
  snapshot.drm.clients.add(500, 4, amd_client("0000:03:00.0", 7));
  snapshot.drm.clients.add(501, 4, amd_client("0000:03:00.0", 7));  // its worker: the same client
  snapshot.drm.clients.add(600, 5, amd_client("0000:23:00.0", 9));
  snapshot.drm.clients.add(700, 3, amd_client("0000:83:00.0", 2));
  snapshot.drm.kfd_nodes = {{11, "0000:03:00.0"}, {22, "0000:23:00.0"}, {33, "0000:83:00.0"}};
  KfdProcess rocm;
  rocm.pid = 800;
  rocm.vram = {{22, 1u << 30}};
  snapshot.drm.kfd_processes.push_back(rocm);

  // From the second GPU of the hive: itself first, then the first.
  const AmdResetScope scope = amd_reset_scope(snapshot, second);
  ASSERT_TRUE(scope.hive_id);
  ASSERT_EQ(scope.gpus.size(), 2u);
  EXPECT_EQ(scope.gpus[0].pci_address, "0000:23:00.0");
  EXPECT_EQ(scope.gpus[0].client_pids, (std::vector<pid_t>{600}));
  EXPECT_EQ(scope.gpus[0].kfd_pids, (std::vector<pid_t>{800}));
  EXPECT_EQ(scope.gpus[1].pci_address, "0000:03:00.0");
  EXPECT_EQ(scope.gpus[1].client_pids, (std::vector<pid_t>{500, 501}));
  EXPECT_TRUE(scope.gpus[1].kfd_pids.empty());
  const auto json = evidence_json(scope.evidence());
  EXPECT_EQ(json["xgmi_hive_id"], hive);  // exact, as a string
  EXPECT_EQ(json["gpus"][1]["client_pids"], nlohmann::json::array({500, 501}));
  const auto lines = scope.lines(snapshot);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "0000:23:00.0: DRM clients 600 (not visible here); KFD processes 800 (not visible here)");

  const AmdResetScope single = amd_reset_scope(snapshot, alone);
  EXPECT_FALSE(single.hive_id);
  ASSERT_EQ(single.gpus.size(), 1u);
  EXPECT_EQ(single.gpus[0].client_pids, (std::vector<pid_t>{700}));
  EXPECT_TRUE(evidence_json(single.evidence())["xgmi_hive_id"].is_null());
}

TEST(DrmSysfsParse, FilesAsTheKernelWritesThem) {
  EXPECT_EQ(parse_pci_id("0x1002\n"), 0x1002);
  EXPECT_EQ(parse_pci_id("0x10DE"), 0x10de);
  EXPECT_EQ(parse_pci_id("1002"), std::nullopt);
  EXPECT_EQ(parse_pci_id("0x10025"), std::nullopt);
  EXPECT_EQ(parse_dev_numbers("226:128\n"), (std::pair<unsigned, unsigned>{226, 128}));
  EXPECT_EQ(parse_dev_numbers("226"), std::nullopt);
  EXPECT_EQ(parse_sysfs_number("17163091968\n"), 17163091968u);
  EXPECT_EQ(parse_sysfs_number("-1\n"), std::nullopt);
  EXPECT_EQ(drm_node_kind("renderD128"), NodeKind::Render);
  EXPECT_EQ(drm_node_kind("card0"), NodeKind::Card);
  EXPECT_EQ(drm_node_kind("card0-DP-1"), std::nullopt);
  EXPECT_EQ(drm_node_kind("controlD64"), std::nullopt);
  const auto fields = parse_uevent("DRIVER=xe\nPCI_ID=8086:56A0\nPCI_SLOT_NAME=0000:03:00.0\n");
  EXPECT_EQ(fields.driver, "xe");
  EXPECT_EQ(fields.pci_slot, "0000:03:00.0");
  EXPECT_EQ(parse_uevent("DRIVER=a b\nPCI_SLOT_NAME=junk\n").pci_slot, "");
  EXPECT_EQ(gpu_id_of_vram_file("vram_46412"), 46412u);
  EXPECT_EQ(gpu_id_of_vram_file("vram_"), std::nullopt);
  EXPECT_EQ(gpu_id_of_vram_file("sdma_46412"), std::nullopt);
  EXPECT_EQ(pci_address_of_kfd_properties("domain 0\n"), std::nullopt);
}

// One client per (drm-pdev, drm-client-id): a descriptor inherited across fork, or dup'd,
// shows the same client in both processes and is counted once.
TEST(DrmClientLedger, SharedDescriptorCountedOnceAcrossProcesses) {
  const auto record = [](std::uint64_t id, const char* pdev, std::uint64_t vram_kib) {
    DrmFdinfo r;
    r.driver = "amdgpu";
    r.pdev = pdev;
    r.client_id = id;
    r.regions.emplace_back().region = "vram";
    r.regions.back().total = vram_kib * 1024;
    return r;
  };
  ClientLedger ledger;
  ledger.add(100, 5, record(217, "0000:03:00.0", 1024));  // the parent
  ledger.add(101, 5, record(217, "0000:03:00.0", 1024));  // its forked worker, same descriptor
  ledger.add(100, 9, record(217, "0000:03:00.0", 1024));  // a dup in the parent
  ledger.add(100, 9, record(217, "0000:03:00.0", 1024));  // read twice: one holder
  ledger.add(102, 4, record(218, "0000:03:00.0", 512));   // another client, same GPU
  ledger.add(103, 4, record(217, "0000:04:00.0", 256));   // the same id on another GPU
  ASSERT_EQ(ledger.clients().size(), 3u);
  EXPECT_EQ(ledger.clients()[0].holders.size(), 3u);
  EXPECT_EQ(ledger.clients()[0].pids(), (std::vector<pid_t>{100, 101}));
  EXPECT_EQ(ledger.device_memory_of("0000:03:00.0"), (1024u + 512u) * 1024);
  EXPECT_EQ(ledger.device_memory_of("0000:04:00.0"), 256u * 1024);
  EXPECT_EQ(ledger.device_memory_of("0000:05:00.0"), std::nullopt);
  EXPECT_EQ(ledger.clients_held_by(101).size(), 1u);
  EXPECT_EQ(ledger.clients_held_by(100).size(), 1u);

  DrmFdinfo anonymous = record(0, "0000:03:00.0", 1);
  anonymous.client_id.reset();
  ledger.add(104, 3, anonymous);
  ledger.add(104, 4, anonymous);  // without an id two descriptors cannot be told apart
  EXPECT_EQ(ledger.clients().size(), 5u);
  EXPECT_EQ(ledger.unidentified(), 2u);
}

}  // namespace
}  // namespace gpureap::drm
