#include "drm/fdinfo_amdgpu_legacy.hpp"

#include "drm/fdinfo_quantity.hpp"
#include "drm/text_scan.hpp"

namespace gpureap::drm {

void AmdgpuLegacyFdinfo::line(std::string_view key, std::string_view value) {
  if (key == "pdev") {
    if (auto address = canonical_pci_address(trimmed(value))) {
      out_.pdev = std::move(*address);
    } else {
      ++out_.lines_not_understood;
    }
    return;
  }
  if (key == "pasid") {
    if (const auto n = parse_plain_count(value); n && *n <= 0xffffffffu) {
      out_.pasid = static_cast<std::uint32_t>(*n);
    } else {
      ++out_.lines_not_understood;
    }
    return;
  }
  // The three memory lines, in the region names amdgpu gave the same numbers from 5.19 on.
  std::string_view region;
  if (key == "vram mem") {
    region = "vram";
  } else if (key == "gtt mem") {
    region = "gtt";
  } else if (key == "cpu mem") {
    region = "cpu";
  } else {
    return;  // the engine percentages and the generic pos/flags/mnt_id/ino
  }
  const auto bytes = parse_amdgpu_legacy_kb(value);
  if (!bytes) {
    ++out_.lines_not_understood;
    return;
  }
  memory_seen_ = true;
  for (auto& r : out_.regions) {
    if (r.region == region) {
      r.total = bytes;
      return;
    }
  }
  auto& added = out_.regions.emplace_back();
  added.region.assign(region);
  added.total = bytes;
  added.total_from_memory_key = true;
}

std::optional<DrmFdinfo> AmdgpuLegacyFdinfo::record() const {
  if (out_.pdev.empty() || !memory_seen_) return std::nullopt;
  DrmFdinfo record = out_;
  record.driver = "amdgpu";  // only amdgpu printed this format
  record.format = FdinfoFormat::AmdgpuBefore519;
  return record;
}

}  // namespace gpureap::drm
