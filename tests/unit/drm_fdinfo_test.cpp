// The DRM fdinfo parser on published samples and documented examples (tests/fixtures/drm,
// README there cites each), and on what the document allows at its edges.
#include "drm/client_ledger.hpp"
#include "drm/fdinfo_quantity.hpp"
#include "drm/fdinfo_record.hpp"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace gpureap::drm {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(GPUREAP_FIXTURE_DIR) + "/drm/" + name);
  EXPECT_TRUE(in) << name;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

TEST(DrmFdinfo, AmdgpuDrmMemoryKeysAreTotalsInKiB) {
  const auto record = parse_drm_fdinfo(fixture("amdgpu-drm-memory.fdinfo"));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->driver, "amdgpu");
  EXPECT_EQ(record->pdev, "0000:08:00.0");
  EXPECT_EQ(record->client_id, 217u);
  EXPECT_EQ(record->pasid, 32784u);
  ASSERT_NE(record->region("vram"), nullptr);
  EXPECT_EQ(record->region("vram")->total, 2068 * KiB);
  EXPECT_TRUE(record->region("vram")->total_from_memory_key);
  EXPECT_EQ(record->region("vram")->resident, std::nullopt);  // not printed: unknown, not zero
  EXPECT_EQ(record->region("gtt")->total, 8192 * KiB);
  EXPECT_EQ(record->region("cpu")->total, 0u);
  ASSERT_NE(record->engine("gfx"), nullptr);
  EXPECT_EQ(record->engine("gfx")->busy_ns, 107322799u);
  EXPECT_EQ(record->engine("gfx")->capacity, 1u);
  EXPECT_EQ(device_memory_bytes(*record), 2068 * KiB);  // vram only: gtt is host memory
  EXPECT_EQ(record->lines_not_understood, 0u);
}

TEST(DrmFdinfo, AmdgpuDrmTotalWinsOverDrmMemoryInTheSameFile) {
  const auto record = parse_drm_fdinfo(fixture("amdgpu-total-resident-constructed.fdinfo"));
  ASSERT_TRUE(record);
  const auto* vram = record->region("vram");
  ASSERT_NE(vram, nullptr);
  EXPECT_EQ(vram->total, 1048576 * KiB);
  EXPECT_FALSE(vram->total_from_memory_key);
  EXPECT_EQ(vram->shared, 4096 * KiB);
  EXPECT_EQ(vram->resident, 1044480 * KiB);
  EXPECT_EQ(vram->purgeable, 0u);
  EXPECT_EQ(shared_device_bytes(*record), 4096 * KiB);
  EXPECT_EQ(record->engine("compute")->busy_ns, 912345678u);
  // The order does not matter: a drm-memory- line after drm-total- does not replace it.
  const auto reversed = parse_drm_fdinfo("drm-driver: amdgpu\ndrm-total-vram: 5 KiB\ndrm-memory-vram: 9 KiB\n");
  ASSERT_TRUE(reversed);
  EXPECT_EQ(reversed->region("vram")->total, 5 * KiB);
}

TEST(DrmFdinfo, AmdxdnaBareNumbersAreBytes) {
  const auto record = parse_drm_fdinfo(fixture("amdxdna-bare-numbers.fdinfo"));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->driver, "amdxdna_accel_driver");
  EXPECT_EQ(record->pdev, "0000:c5:00.1");
  EXPECT_EQ(record->client_id, 76u);
  EXPECT_EQ(record->region("memory")->total, 0u);
  EXPECT_EQ(record->region("memory")->active, 0u);
  EXPECT_EQ(record->engine("npu-amdxdna")->busy_ns, 0u);
  EXPECT_EQ(device_memory_bytes(*record), std::nullopt);  // "memory" is system memory
  EXPECT_EQ(parse_drm_fdinfo("drm-driver: x\ndrm-total-vram: 123456789\n")->region("vram")->total, 123456789u);
}

TEST(DrmFdinfo, XeVramInKiBAndMiBCyclesAndCapacities) {
  const auto record = parse_drm_fdinfo(fixture("xe-documented.fdinfo"));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->driver, "xe");
  EXPECT_EQ(record->client_id, 3u);
  EXPECT_EQ(record->pdev, "0000:03:00.0");
  EXPECT_EQ(record->region("vram0")->total, 23992 * KiB);
  EXPECT_EQ(record->region("vram0")->shared, 16 * MiB);
  EXPECT_EQ(record->region("vram0")->resident, 23992 * KiB);
  EXPECT_EQ(record->region("gtt")->total, 192 * KiB);
  EXPECT_EQ(record->region("system")->purgeable, 0u);
  // drm-total-cycles-rcs is a cycle count, not the memory of a region called "cycles-rcs".
  EXPECT_EQ(record->region("cycles-rcs"), nullptr);
  ASSERT_NE(record->engine("rcs"), nullptr);
  EXPECT_EQ(record->engine("rcs")->cycles, 28257900u);
  EXPECT_EQ(record->engine("rcs")->total_cycles, 7655183225u);
  EXPECT_EQ(record->engine("rcs")->busy_ns, std::nullopt);
  EXPECT_EQ(record->engine("ccs")->capacity, 4u);
  EXPECT_EQ(record->engine("vcs")->capacity, 2u);
  EXPECT_EQ(device_memory_bytes(*record), 23992 * KiB);
  EXPECT_EQ(record->lines_not_understood, 0u);
}

TEST(DrmFdinfo, I915SystemAndStolenRegionsEnginesWithCapacity) {
  const auto record = parse_drm_fdinfo(fixture("i915-documented.fdinfo"));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->driver, "i915");
  EXPECT_EQ(record->client_id, 39u);
  EXPECT_EQ(record->pdev, "0000:00:02.0");
  EXPECT_EQ(record->region("system0")->total, 6044 * KiB);
  EXPECT_EQ(record->region("system0")->purgeable, 1688 * KiB);
  ASSERT_NE(record->region("stolen-system0"), nullptr);
  EXPECT_EQ(record->region("stolen-system0")->total, 0u);
  EXPECT_EQ(record->engine("render")->busy_ns, 346249u);
  EXPECT_EQ(record->engine("video")->capacity, 2u);
  ASSERT_NE(record->engine("video-enhance"), nullptr);
  EXPECT_EQ(device_memory_bytes(*record), std::nullopt);  // an integrated GPU: no local memory
  EXPECT_EQ(record->lines_not_understood, 0u);
}

// amdgpu 5.14 to 5.18: its own keys, "kB" that is KiB, the same record as drm-memory-<region>.
TEST(DrmFdinfo, AmdgpuBefore519GivesTheSameRecordInBytes) {
  const auto record = parse_drm_fdinfo(fixture("amdgpu-before-5.19-constructed.fdinfo"));
  ASSERT_TRUE(record);
  EXPECT_EQ(record->format, FdinfoFormat::AmdgpuBefore519);
  EXPECT_EQ(record->driver, "amdgpu");
  EXPECT_EQ(record->pdev, "0000:03:00.0");
  EXPECT_EQ(record->client_id, std::nullopt);  // the old format has none
  EXPECT_EQ(record->pasid, 32771u);
  ASSERT_EQ(record->regions.size(), 3u);
  EXPECT_EQ(record->region("vram")->total, 1572864 * KiB);
  EXPECT_TRUE(record->region("vram")->total_from_memory_key);
  EXPECT_EQ(record->region("vram")->resident, std::nullopt);
  EXPECT_EQ(record->region("gtt")->total, 20480 * KiB);
  EXPECT_EQ(record->region("cpu")->total, 0u);
  EXPECT_EQ(device_memory_bytes(*record), 1572864 * KiB);
  EXPECT_EQ(shared_device_bytes(*record), std::nullopt);
  // Percentages over varying time slices are no busy time: no engine, and nothing misread.
  EXPECT_TRUE(record->engines.empty());
  EXPECT_EQ(record->lines_not_understood, 0u);

  // The modern fixture's record has the same shape: regions by the same names, in bytes.
  const auto modern = parse_drm_fdinfo(fixture("amdgpu-drm-memory.fdinfo"));
  ASSERT_TRUE(modern);
  EXPECT_EQ(modern->format, FdinfoFormat::DrmUsageStats);
  for (const char* region : {"vram", "gtt", "cpu"}) {
    ASSERT_NE(modern->region(region), nullptr) << region;
    EXPECT_EQ(modern->region(region)->total_from_memory_key, record->region(region)->total_from_memory_key);
  }
}

TEST(DrmFdinfo, AmdgpuBefore519IsReadStrictly) {
  // Without pdev, or without any memory line, it is not that format.
  EXPECT_FALSE(parse_drm_fdinfo("pasid:\t32771\nvram mem:\t12 kB\n"));
  EXPECT_FALSE(parse_drm_fdinfo("pdev:\t0000:03:00.0\npasid:\t32771\n"));
  EXPECT_FALSE(parse_drm_fdinfo("pdev:\t0000:03:00.0\nvram mem:\t12 KiB\n"));  // its unit was kB
  EXPECT_FALSE(parse_drm_fdinfo("pdev:\tjunk\nvram mem:\t12 kB\n"));
  // A valid file with lines that are not: counted, never guessed.
  const auto record = parse_drm_fdinfo(
      "pdev:\t0000:0A:00.0\n"
      "pasid:\t-4\n"
      "vram mem:\t12 kB\n"
      "gtt mem:\t18014398509481984 kB\n"  // 2^54 KiB does not fit in 64 bits of bytes
      "cpu mem:\t1 MB\n"
      "vram  mem:\t99 kB\n"               // not a key of the format
      "gfx0:\t100.0%\n");
  ASSERT_TRUE(record);
  EXPECT_EQ(record->pdev, "0000:0a:00.0");
  EXPECT_EQ(record->pasid, std::nullopt);
  EXPECT_EQ(record->region("vram")->total, 12 * KiB);
  EXPECT_EQ(record->region("gtt"), nullptr);
  EXPECT_EQ(record->region("cpu"), nullptr);
  EXPECT_EQ(record->lines_not_understood, 3u);
  // A drm-driver line makes it the document's format: the old keys are not mixed in.
  const auto modern = parse_drm_fdinfo("drm-driver:\tamdgpu\npdev:\t0000:03:00.0\nvram mem:\t12 kB\n");
  ASSERT_TRUE(modern);
  EXPECT_EQ(modern->format, FdinfoFormat::DrmUsageStats);
  EXPECT_EQ(modern->pdev, "");
  EXPECT_TRUE(modern->regions.empty());
  // Past the bound nothing is read, in this format too.
  const auto cut = parse_drm_fdinfo("pdev:\t0000:03:00.0\nvram mem:\t4 kB\n" + std::string(kMaxFdinfoBytes, '\n') +
                                    "gtt mem:\t8 kB\n");
  ASSERT_TRUE(cut);
  EXPECT_TRUE(cut->cut);
  EXPECT_EQ(cut->region("gtt"), nullptr);
  EXPECT_EQ(parse_amdgpu_legacy_kb(" 7 kB"), 7 * KiB);
  EXPECT_EQ(parse_amdgpu_legacy_kb("7"), std::nullopt);
  EXPECT_EQ(parse_amdgpu_legacy_kb("7 kB 8"), std::nullopt);
}

// One host, both formats (one GPU's clients read from old text, another's from new): each
// client once, the old ones told apart by pasid, the new ones by drm-client-id, never the one
// by the other's number.
TEST(DrmFdinfo, BothFormatsOnOneHostCountEachClientOnce) {
  auto legacy = parse_drm_fdinfo(fixture("amdgpu-before-5.19-constructed.fdinfo"));  // 0000:03:00.0
  auto modern = parse_drm_fdinfo(fixture("amdgpu-drm-memory.fdinfo"));               // 0000:08:00.0
  ASSERT_TRUE(legacy && modern);
  ClientLedger ledger;
  ledger.add(100, 5, *legacy);
  ledger.add(101, 5, *legacy);  // a forked worker: same open file, same pasid
  ledger.add(200, 7, *modern);
  ledger.add(201, 7, *modern);
  auto other = *legacy;  // another open file of the same GPU
  other.pasid = 32772;
  other.regions[0].total = 4 * KiB;
  ledger.add(102, 6, other);
  auto same_number = *modern;  // drm-client-id 217 on the old format's GPU is not pasid 217
  same_number.pdev = "0000:03:00.0";
  auto old_217 = *legacy;
  old_217.pasid = 217;
  ledger.add(300, 3, same_number);
  ledger.add(301, 3, old_217);
  ASSERT_EQ(ledger.clients().size(), 5u);
  EXPECT_EQ(ledger.unidentified(), 0u);
  EXPECT_EQ(ledger.clients()[0].pids(), (std::vector<pid_t>{100, 101}));
  EXPECT_EQ(ledger.clients()[1].pids(), (std::vector<pid_t>{200, 201}));
  EXPECT_EQ(ledger.device_memory_of("0000:08:00.0"), 2068 * KiB);
  EXPECT_EQ(ledger.device_memory_of("0000:03:00.0"), (1572864 + 4 + 2068 + 1572864) * KiB);
  // pasid 0 is amdgpu's "none could be had": such a client cannot be matched.
  auto no_pasid = *legacy;
  no_pasid.pasid = 0;
  ledger.add(400, 3, no_pasid);
  ledger.add(401, 3, no_pasid);
  EXPECT_EQ(ledger.unidentified(), 2u);
  EXPECT_EQ(client_identity(*legacy), 32771u);
  EXPECT_EQ(client_identity(*modern), 217u);
}

TEST(DrmFdinfo, NotADrmClientWithoutDrmDriver) {
  EXPECT_FALSE(parse_drm_fdinfo("pos:\t0\nflags:\t02\nmnt_id:\t25\nino:\t7\n"));
  EXPECT_FALSE(parse_drm_fdinfo(""));
  EXPECT_FALSE(parse_drm_fdinfo("drm-driver:\n"));
  EXPECT_FALSE(parse_drm_fdinfo("drm-driver: two words\n"));
}

TEST(DrmFdinfo, WhatTheDocumentDoesNotAllowIsCountedNotGuessed) {
  const auto record = parse_drm_fdinfo(
      "drm-driver: amdgpu\n"
      "drm-pdev: 0000:zz:00.0\n"            // not a PCI address
      "drm-engine-gfx: 12\n"                // a time without ns
      "drm-engine-capacity-gfx: 0\n"        // zero capacity is not allowed
      "drm-total-vram: 12 KB\n"             // not a unit of the document
      "drm-total-gtt: 99999999999999999999 KiB\n"  // does not fit
      "drm-total-vram: -1\n"
      "drm-total-bad region: 1\n"           // a key with whitespace is not a key
      "drm-client-id: 12x\n");
  ASSERT_TRUE(record);
  EXPECT_EQ(record->pdev, "");
  EXPECT_EQ(record->client_id, std::nullopt);
  EXPECT_EQ(record->region("vram"), nullptr);
  EXPECT_EQ(record->region("gtt"), nullptr);
  EXPECT_EQ(record->lines_not_understood, 7u);
}

TEST(DrmFdinfo, UnitsAndOverflow) {
  EXPECT_EQ(parse_memory_value("0"), 0u);
  EXPECT_EQ(parse_memory_value(" 7 KiB"), 7 * KiB);
  EXPECT_EQ(parse_memory_value("\t3 MiB"), 3 * MiB);
  EXPECT_EQ(parse_memory_value("2 GiB"), 2 * 1024 * MiB);
  EXPECT_EQ(parse_memory_value("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_memory_value("18446744073709551616"), std::nullopt);
  EXPECT_EQ(parse_memory_value("18014398509481984 KiB"), std::nullopt);  // 2^54 KiB = 2^64 bytes
  EXPECT_EQ(parse_memory_value("18014398509481983 KiB"), (UINT64_MAX >> 10) << 10);
  EXPECT_EQ(parse_memory_value("1 kB"), std::nullopt);
  EXPECT_EQ(parse_memory_value("KiB"), std::nullopt);
  EXPECT_EQ(parse_memory_value("1 KiB x"), std::nullopt);
  EXPECT_EQ(parse_engine_ns("5 ns"), 5u);
  EXPECT_EQ(parse_engine_ns("5"), std::nullopt);
  EXPECT_EQ(parse_plain_count("5 ns"), std::nullopt);
}

TEST(DrmFdinfo, BoundedInNamesRegionsAndLength) {
  std::string text = "drm-driver: amdgpu\n";
  for (int i = 0; i < 100; ++i) text += "drm-total-r" + std::to_string(i) + ": 1\n";
  for (int i = 0; i < 100; ++i) text += "drm-engine-e" + std::to_string(i) + ": 1 ns\n";
  text += "drm-total-" + std::string(200, 'a') + ": 1\n";
  auto record = parse_drm_fdinfo(text);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->regions.size(), kMaxRegions);
  EXPECT_EQ(record->engines.size(), kMaxEngines);
  EXPECT_EQ(record->lines_not_understood, (100 - kMaxRegions) + (100 - kMaxEngines) + 1);
  EXPECT_FALSE(record->cut);

  std::string huge = "drm-driver: amdgpu\ndrm-client-id: 5\n" + std::string(kMaxFdinfoBytes, '\n') + "drm-pdev: 0000:01:00.0\n";
  record = parse_drm_fdinfo(huge);
  ASSERT_TRUE(record);
  EXPECT_TRUE(record->cut);
  EXPECT_EQ(record->pdev, "");  // past the bound: never read
}

TEST(DrmFdinfo, DeviceMemoryRegionsAndPciAddresses) {
  EXPECT_TRUE(is_device_memory_region("vram"));
  EXPECT_TRUE(is_device_memory_region("vram0"));
  EXPECT_TRUE(is_device_memory_region("vram12"));
  EXPECT_TRUE(is_device_memory_region("local0"));
  EXPECT_FALSE(is_device_memory_region("gtt"));
  EXPECT_FALSE(is_device_memory_region("system0"));
  EXPECT_FALSE(is_device_memory_region("stolen-local0"));
  EXPECT_FALSE(is_device_memory_region("vramx"));
  EXPECT_EQ(canonical_pci_address("0000:0A:00.0"), "0000:0a:00.0");
  EXPECT_EQ(canonical_pci_address("0000:0a:00.8"), std::nullopt);
  EXPECT_EQ(canonical_pci_address("0000:0a:00"), std::nullopt);
  EXPECT_EQ(canonical_pci_address("00000:0a:00.0"), std::nullopt);
}

}  // namespace
}  // namespace gpureap::drm
