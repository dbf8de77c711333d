// The DRM fdinfo parser (src/drm): the kernel writes these files, but a test root or a driver
// bug may not, and gpureap reads every process's. Any bytes: bounded results, names taken
// from the input; a fuzzer-chosen region and value inside a well-formed file come back exactly,
// in the document's format and in amdgpu's older one.
#include <cstdint>
#include <string>
#include <string_view>

#include <fuzzer/FuzzedDataProvider.h>

#include "drm/client_ledger.hpp"
#include "drm/fdinfo_quantity.hpp"
#include "drm/fdinfo_record.hpp"
#include "fuzz_check.hpp"

namespace gpureap::drm {
namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

void check_any_text(std::string_view text) {
  const auto record = parse_drm_fdinfo(text);
  if (!record) return;
  const std::string_view seen = text.substr(0, kMaxFdinfoBytes);
  if (record->format == FdinfoFormat::AmdgpuBefore519) {
    FUZZ_CHECK(record->driver == "amdgpu" && !record->pdev.empty() && record->engines.empty());
    FUZZ_CHECK(!record->client_id && record->regions.size() <= 3);
  } else {
    FUZZ_CHECK(!record->driver.empty() && seen.find(record->driver) != std::string_view::npos);
  }
  FUZZ_CHECK(record->regions.size() <= kMaxRegions && record->engines.size() <= kMaxEngines);
  if (!record->pdev.empty()) FUZZ_CHECK(canonical_pci_address(record->pdev) == record->pdev);
  for (const auto& region : record->regions) {
    FUZZ_CHECK(!region.region.empty() && region.region.size() <= kMaxNameLength);
    FUZZ_CHECK(seen.find(region.region) != std::string_view::npos);
  }
  for (const auto& engine : record->engines) {
    FUZZ_CHECK(engine.capacity >= 1);
    FUZZ_CHECK(seen.find(engine.engine) != std::string_view::npos);
  }
  (void)device_memory_bytes(*record);
  ClientLedger ledger;
  ledger.add(1, 3, *record);
  ledger.add(2, 3, *record);
  const bool identified = client_identity(*record).has_value();
  FUZZ_CHECK(ledger.clients().size() == (identified ? 1u : 2u));
  if (identified) FUZZ_CHECK(ledger.device_memory_of(record->pdev) == device_memory_bytes(*record));
}

void check_round_trip(FuzzedDataProvider& in) {
  std::string region;
  for (const char c : in.ConsumeRandomLengthString(kMaxNameLength)) {
    if (name_char(c)) region += c;
  }
  // Keys that share the drm-total- prefix are not regions.
  if (region.empty() || region.rfind("cycles-", 0) == 0) return;
  const std::uint64_t value = in.ConsumeIntegral<std::uint32_t>();
  const unsigned unit = in.ConsumeIntegralInRange<unsigned>(0, 3);
  static constexpr std::string_view kUnits[] = {"", " KiB", " MiB", " GiB"};
  const std::string text = "pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\t7\ndrm-total-" + region + ":\t" +
                           std::to_string(value) + std::string(kUnits[unit]) + "\n";
  const auto record = parse_drm_fdinfo(text);
  FUZZ_CHECK(record && record->regions.size() == 1);
  FUZZ_CHECK(record->regions[0].region == region);
  FUZZ_CHECK(record->regions[0].total == value << (10 * unit));
  FUZZ_CHECK(record->lines_not_understood == 0);
}

// amdgpu's format before 5.19: "kB" is KiB, its pasid tells its clients apart.
void check_amdgpu_before_519(FuzzedDataProvider& in) {
  const std::uint64_t kib = in.ConsumeIntegral<std::uint32_t>();
  const std::string old = "pdev:\t0000:03:00.0\npasid:\t9\nvram mem:\t" + std::to_string(kib) + " kB\n";
  const auto legacy = parse_drm_fdinfo(old);
  FUZZ_CHECK(legacy && legacy->format == FdinfoFormat::AmdgpuBefore519);
  FUZZ_CHECK(legacy->region("vram") != nullptr && legacy->region("vram")->total == kib << 10);
  FUZZ_CHECK(client_identity(*legacy) == 9u);
}

}  // namespace
}  // namespace gpureap::drm

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpureap::drm::check_any_text(text);
  (void)gpureap::drm::parse_memory_value(text.substr(0, 64));
  (void)gpureap::drm::parse_amdgpu_legacy_kb(text.substr(0, 64));
  FuzzedDataProvider in(data, size);
  gpureap::drm::check_round_trip(in);
  gpureap::drm::check_amdgpu_before_519(in);
  return 0;
}
