// The second GPU source: DRM descriptors found by the /proc scan (real processes holding files
// named as udev names DRM nodes, in a temporary dev dir), their fdinfo read into clients counted
// once, and the devices of a sysfs tree; NVIDIA's views never see these descriptors.
#include "drm/drm_reading.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "proc/proc_parse.hpp"

namespace gpureap::drm {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const char* what) {
  std::string pattern = std::string("/tmp/gpureap-") + what + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  return fs::canonical(pattern).string();
}

void write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(DrmPaths, RenderCardAndKfdNodesAreDrmFilesNotNvidiaOnes) {
  const auto render = classify_drm_path("/dev/dri/renderD128", "/dev");
  ASSERT_TRUE(render);
  EXPECT_EQ(render->kind, DeviceFileKind::DrmRender);
  EXPECT_EQ(render->minor, 128);
  const auto card = classify_drm_path("/dev/dri/card0 (deleted)", "/dev");
  ASSERT_TRUE(card);
  EXPECT_EQ(card->kind, DeviceFileKind::DrmCard);
  EXPECT_EQ(card->minor, 0);
  EXPECT_EQ(card->path, "/dev/dri/card0 (deleted)");
  EXPECT_EQ(classify_drm_path("/dev/kfd", "/dev")->kind, DeviceFileKind::Kfd);
  for (const char* other : {"/dev/dri/by-path/pci-0000:03:00.0-render", "/dev/dri/card", "/dev/dri/cardX",
                            "/dev/nvidia0", "/dev/kfd2", "/tmp/dev/dri/card0"}) {
    EXPECT_FALSE(classify_drm_path(other, "/dev")) << other;
  }
  EXPECT_FALSE(classify_device_path("/dev/dri/renderD128", "/dev"));  // NVIDIA's classifier
  const auto link = classify_fd_link("7", "/dev/dri/renderD129", "/dev");
  ASSERT_TRUE(link);
  EXPECT_EQ(link->fd, 7);
  EXPECT_EQ(link->kind, DeviceFileKind::DrmRender);
}

// A forked worker inherits its parent's render descriptor: two processes, one client, its
// memory once. A descriptor whose fdinfo is gone is counted as unread, never as zero.
TEST(DrmReading, ForkSharedClientCountedOnceFromFdinfo) {
  const std::string proc = temp_dir("drm-proc");
  const std::string amdgpu = "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\n"
                             "drm-client-id:\t217\ndrm-memory-vram:\t2097152 KiB\ndrm-memory-gtt:\t8192 KiB\n";
  write(proc + "/100/fdinfo/5", amdgpu);
  write(proc + "/101/fdinfo/5", amdgpu);
  write(proc + "/101/fdinfo/6", "pos:\t0\nflags:\t02\n");  // not a DRM client's
  write(proc + "/102/fdinfo/4",
        "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t300\ndrm-memory-vram:\t1024 KiB\n");
  const auto render = [](int fd, int minor) {
    DeviceFileHandle h;
    h.fd = fd;
    h.kind = DeviceFileKind::DrmRender;
    h.minor = minor;
    return h;
  };
  DeviceFileHandle kfd;
  kfd.fd = 9;
  kfd.kind = DeviceFileKind::Kfd;
  ClientLedger ledger;
  EXPECT_EQ(add_fdinfo_clients(ledger, proc, 100, {render(5, 128), kfd}), 0u);
  EXPECT_EQ(add_fdinfo_clients(ledger, proc, 101, {render(5, 128), render(6, 128), render(8, 128)}), 2u);
  EXPECT_EQ(add_fdinfo_clients(ledger, proc, 102, {render(4, 128)}), 0u);
  EXPECT_EQ(add_fdinfo_clients(ledger, proc, 103, {render(4, 128)}), 1u);  // exited: no directory
  ASSERT_EQ(ledger.clients().size(), 2u);
  EXPECT_EQ(ledger.clients()[0].pids(), (std::vector<pid_t>{100, 101}));
  EXPECT_EQ(ledger.device_memory_of("0000:03:00.0"), (2097152u + 1024u) * 1024);
  std::error_code ignored;
  fs::remove_all(proc, ignored);
}

// Real processes: a parent holding /dev/dri/renderD128 of a temporary dev dir and the worker it
// forked, beside a process holding card0 only. The scan puts them in drm_files, not in the
// NVIDIA device_files every NVIDIA view reads; read_drm finds the AMD device of a sysfs tree and
// leaves out an NVIDIA one.
TEST(DrmReading, RealHoldersOfRenderAndCardNodes) {
  const std::string dev = temp_dir("drm-dev");
  write(dev + "/dri/renderD128", "");
  write(dev + "/dri/card0", "");
  const std::string sys = temp_dir("drm-sys");
  write(sys + "/devices/0000:03:00.0/uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n");
  write(sys + "/devices/0000:03:00.0/vendor", "0x1002\n");
  write(sys + "/devices/0000:03:00.0/mem_info_vram_used", "4096\n");
  write(sys + "/devices/0000:41:00.0/uevent", "DRIVER=nvidia\nPCI_SLOT_NAME=0000:41:00.0\n");
  write(sys + "/devices/0000:41:00.0/vendor", "0x10de\n");
  for (const auto& [node, pci, minor] : {std::tuple{"renderD128", "0000:03:00.0", 128}, {"card0", "0000:03:00.0", 0},
                                         {"card1", "0000:41:00.0", 1}}) {
    write(sys + "/class/drm/" + node + "/dev", "226:" + std::to_string(minor) + "\n");
    fs::create_directory_symlink(sys + "/devices/" + pci, sys + "/class/drm/" + node + "/device");
  }

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  if (holder == 0) {
    const int fd = ::open((dev + "/dri/renderD128").c_str(), O_RDONLY);
    const pid_t worker = ::fork();  // inherits fd
    if (worker == 0) {
      ::pause();
      ::_exit(0);
    }
    const std::string line = std::to_string(worker) + "\n";
    (void)!::write(ready[1], line.data(), line.size());
    ::pause();
    ::_exit(fd < 0);
  }
  const pid_t display = ::fork();
  if (display == 0) {
    const int fd = ::open((dev + "/dri/card0").c_str(), O_RDONLY);
    (void)!::write(ready[1], "d\n", 2);
    ::pause();
    ::_exit(fd < 0);
  }
  ::close(ready[1]);
  std::string got;
  char c;
  while (std::count(got.begin(), got.end(), '\n') < 2 && ::read(ready[0], &c, 1) == 1) got += c;
  ::close(ready[0]);
  const pid_t worker = std::atoi(got[0] == 'd' ? got.c_str() + 2 : got.c_str());

  ProcScanOptions options;
  options.dev_dir = dev;
  const ProcessTable table = ProcessTable::scan(options);
  for (const pid_t pid : {holder, worker}) {
    const ProcessInfo* p = table.find(pid);
    ASSERT_NE(p, nullptr) << pid;
    EXPECT_FALSE(p->holds_any_device_file()) << pid;  // nothing for NVIDIA's views
    ASSERT_EQ(p->drm_files.size(), 1u) << pid;
    EXPECT_EQ(p->drm_files[0].kind, DeviceFileKind::DrmRender);
    EXPECT_EQ(p->drm_files[0].minor, 128);
  }
  ASSERT_NE(table.find(display), nullptr);
  ASSERT_EQ(table.find(display)->drm_files.size(), 1u);
  EXPECT_EQ(table.find(display)->drm_files[0].kind, DeviceFileKind::DrmCard);

  const DrmReading reading = read_drm({sys, "/proc"}, table);
  ASSERT_EQ(reading.devices.size(), 1u);  // the NVIDIA one is NVML's
  EXPECT_EQ(reading.devices[0].pci_address, "0000:03:00.0");
  EXPECT_EQ(reading.devices[0].vram_used, 4096u);
  EXPECT_EQ(reading.device_with_minor(128), &reading.devices[0]);
  EXPECT_EQ(reading.device_with_minor(1), nullptr);
  // Plain files have no drm- keys in their fdinfo: three descriptors of unknown memory.
  EXPECT_EQ(reading.clients.clients().size(), 0u);
  EXPECT_EQ(reading.fdinfo_unread, 3u);

  for (const pid_t pid : {worker, holder, display}) ::kill(pid, SIGKILL);
  for (const pid_t pid : {holder, display}) ::waitpid(pid, nullptr, 0);
  std::error_code ignored;
  fs::remove_all(dev, ignored);
  fs::remove_all(sys, ignored);
}

// A process's device memory per GPU: each client it holds once (a forked worker sharing it
// shows the same), KFD allocations only where it holds no client of that GPU (through the
// client they are counted already), nothing on a GPU that is not the reading's (NVIDIA's), and
// no KFD context at all where KFD's PIDs are not this namespace's.
TEST(DrmReading, DeviceMemoryOfAProcessCountsEachClientOnceAndKfdOnlyOutsideClients) {
  const std::string a = "0000:03:00.0";
  const std::string b = "0000:04:00.0";
  DrmReading reading;
  for (const auto& pci : {a, b}) {
    DrmDevice device;
    device.pci_address = pci;
    reading.devices.push_back(device);
  }
  reading.kfd_nodes = {{111, a}, {222, b}};
  const auto client = [](const std::string& pdev, int id, int kib) {
    return *parse_drm_fdinfo("drm-driver:\tamdgpu\ndrm-pdev:\t" + pdev + "\ndrm-client-id:\t" + std::to_string(id) +
                             "\ndrm-memory-vram:\t" + std::to_string(kib) + " KiB\n");
  };
  reading.clients.add(100, 5, client(a, 217, 2 * 1024 * 1024));
  reading.clients.add(100, 6, client(a, 217, 2 * 1024 * 1024));  // a dup of the same client
  reading.clients.add(101, 5, client(a, 217, 2 * 1024 * 1024));  // its forked worker's
  reading.clients.add(100, 7, client("0000:65:00.0", 9, 4 * 1024 * 1024));  // not this reading's GPU
  reading.kfd_processes = {{100, 7, {{111, 2ull << 30}, {222, 1ull << 30}}}, {300, 8, {{111, 512ull << 20}}}};

  using Memory = std::map<std::string, std::uint64_t>;
  EXPECT_EQ(device_memory_of_process(reading, 100, true), (Memory{{a, 2ull << 30}, {b, 1ull << 30}}));
  EXPECT_EQ(device_memory_of_process(reading, 101, true), (Memory{{a, 2ull << 30}}));
  EXPECT_EQ(device_memory_of_process(reading, 300, true), (Memory{{a, 512ull << 20}}));
  EXPECT_EQ(device_memory_of_process(reading, 100, false), (Memory{{a, 2ull << 30}}));
  EXPECT_EQ(device_memory_of_process(reading, 300, false), Memory{});
  EXPECT_EQ(device_memory_of_process(reading, 999, true), Memory{});
}

}  // namespace
}  // namespace gpureap::drm
