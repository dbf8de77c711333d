// Whether a host has NVIDIA GPUs without NVIDIA's library: a GPU node, a display controller of
// vendor 0x10de, or the kernel module; NVIDIA's audio function alone, or another vendor's GPU,
// is no evidence. Fixture trees stand for /dev, /sys and /proc.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "snapshot/nvidia_presence.hpp"

namespace gpureap {
namespace {

namespace fs = std::filesystem;

struct Host {
  Host() {
    std::string pattern = "/tmp/gpureap-presence-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    root = pattern;
    for (const char* dir : {"/dev", "/sys/bus/pci/devices", "/proc"}) fs::create_directories(root + dir);
  }
  ~Host() { fs::remove_all(root); }
  void file(const std::string& path, const std::string& text) const {
    fs::create_directories(fs::path(root + path).parent_path());
    std::ofstream(root + path) << text;
  }
  void pci(const std::string& address, const std::string& vendor, const std::string& cls) const {
    file("/sys/bus/pci/devices/" + address + "/vendor", vendor + "\n");
    file("/sys/bus/pci/devices/" + address + "/class", cls + "\n");
  }
  std::string evidence() const { return nvidia_hardware_evidence(root + "/dev", root + "/sys", root + "/proc"); }
  std::string root;
};

TEST(NvidiaPresence, NothingNvidiaIsNoEvidence) {
  const Host host;
  host.file("/dev/null", "");
  host.file("/dev/nvidia-uvm", "");  // not a GPU node: nvidia<N> only
  host.pci("0000:00:02.0", "0x8086", "0x030000");  // an Intel GPU
  host.pci("0000:41:00.1", "0x10de", "0x040300");  // NVIDIA's HDMI audio function alone
  EXPECT_EQ(host.evidence(), "");
}

TEST(NvidiaPresence, ANodeADisplayControllerOrTheModuleIsNamed) {
  {
    const Host host;
    host.file("/dev/nvidia3", "");
    EXPECT_EQ(host.evidence(), "the GPU device node " + host.root + "/dev/nvidia3");
  }
  {
    const Host host;
    host.pci("0000:41:00.1", "0x10de", "0x040300");
    host.pci("0000:41:00.0", "0x10de", "0x030200");
    EXPECT_EQ(host.evidence(), "the PCI device 0000:41:00.0 (vendor 0x10de, NVIDIA)");
  }
  {
    const Host host;
    fs::create_directories(host.root + "/sys/module/nvidia");
    EXPECT_EQ(host.evidence(), "the nvidia kernel module (" + host.root + "/sys/module/nvidia)");
  }
}

}  // namespace
}  // namespace gpureap
