// resolve_gpu_choice: the one parser of --gpu and --gpus, on a hand-made host with two NVIDIA
// GPUs and two AMD GPUs. Indices, ranges and UUIDs name NVIDIA's; a PCI address names a GPU of
// any vendor (an NVIDIA one by its index); what names nothing, or more than one, is an error.
#include <gtest/gtest.h>

#include "cli/common/gpu_choice.hpp"

namespace gpureap {
namespace {

Snapshot host_with_both() {
  Snapshot snapshot;
  snapshot.driver.loaded = true;
  for (unsigned i = 0; i < 2; ++i) {
    GpuView gpu;
    gpu.reading.index = i;
    gpu.reading.uuid = i == 0 ? "GPU-8f1c0000-aaaa" : "GPU-8f2d0000-bbbb";
    gpu.reading.pci_bus_id = i == 0 ? "00000000:3B:00.0" : "00000000:5E:00.0";
    snapshot.gpus.push_back(gpu);
  }
  for (const char* pci : {"0000:c1:00.0", "0000:c2:00.0"}) {
    drm::DrmDevice device;
    device.pci_address = pci;
    device.vendor = drm::GpuVendor::Amd;
    snapshot.drm.devices.push_back(device);
  }
  return snapshot;
}

std::optional<GpuChoice> choose(const Snapshot& snapshot, const std::string& list, GpuChoiceError* error = nullptr) {
  GpuChoiceError ignored;
  return resolve_gpu_choice({list}, snapshot, "--gpus", error != nullptr ? *error : ignored);
}

TEST(GpuChoice, IndicesRangesUuidsAndPciAddressesOfEveryVendor) {
  const Snapshot snapshot = host_with_both();
  const auto choice = choose(snapshot, "0-1,0000:c1:00.0");
  ASSERT_TRUE(choice);
  EXPECT_EQ(choice->nvidia, (std::set<unsigned>{0, 1}));
  EXPECT_EQ(choice->drm, (std::set<std::string>{"0000:c1:00.0"}));
  const auto by_pci = choose(snapshot, "5e:00.0,C2:00.0");  // short form, any case
  ASSERT_TRUE(by_pci);
  EXPECT_EQ(by_pci->nvidia, (std::set<unsigned>{1}));
  EXPECT_EQ(by_pci->drm, (std::set<std::string>{"0000:c2:00.0"}));
  const auto by_uuid = choose(snapshot, "GPU-8f2d");
  ASSERT_TRUE(by_uuid);
  EXPECT_EQ(by_uuid->nvidia, (std::set<unsigned>{1}));
}

TEST(GpuChoice, WhatNamesNothingOrMoreThanOneIsAnErrorNamingTheItem) {
  const Snapshot snapshot = host_with_both();
  for (const char* bad : {"2", "0000:c3:00.0", "GPU-8f", "GPU-ffff", "1-0", "0,,1", "", "c1:00", "zz:00.0", "0;id"}) {
    GpuChoiceError error;
    EXPECT_FALSE(choose(snapshot, bad, &error)) << bad;
    EXPECT_EQ(error.message.rfind("--gpus ", 0), 0u) << error.message;
    EXPECT_FALSE(error.needs_nvidia_library) << bad;
  }
  GpuChoiceError error;
  EXPECT_FALSE(choose(snapshot, "0000:c3:00.0", &error));
  EXPECT_NE(error.message.find("0000:c1:00.0"), std::string::npos) << "names what the host has: " << error.message;
}

// Without NVIDIA's library an index is the driver's failure; a PCI address still works.
TEST(GpuChoice, WithoutNvidiasLibraryOnlyPciAddressesResolve) {
  Snapshot snapshot = host_with_both();
  snapshot.gpus.clear();
  snapshot.driver.loaded = false;
  snapshot.driver.message = "libnvidia-ml.so.1 not found";
  GpuChoiceError error;
  EXPECT_FALSE(choose(snapshot, "0", &error));
  EXPECT_TRUE(error.needs_nvidia_library) << error.message;
  const auto amd = choose(snapshot, "0000:c2:00.0");
  ASSERT_TRUE(amd);
  EXPECT_TRUE(amd->nvidia.empty());
  EXPECT_EQ(amd->drm, (std::set<std::string>{"0000:c2:00.0"}));
}

}  // namespace
}  // namespace gpureap
