#include "drm/fdinfo_record.hpp"

#include <algorithm>

#include "drm/fdinfo_amdgpu_legacy.hpp"
#include "drm/fdinfo_quantity.hpp"
#include "drm/text_scan.hpp"

namespace gpureap::drm {
namespace {

// A <keystr> as the document defines it, bounded: letters, digits, '-', '_', '.'.
bool is_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  });
}

bool take_prefix(std::string_view& text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return false;
  text.remove_prefix(prefix.size());
  return true;
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

class Builder {
 public:
  explicit Builder(DrmFdinfo& out) : out_(out) {}

  void line(std::string_view key, std::string_view value) {
    if (key == "pasid") {
      if (const auto n = parse_plain_count(value); n && *n <= 0xffffffffu) {
        out_.pasid = static_cast<std::uint32_t>(*n);
      }
      return;
    }
    if (!take_prefix(key, "drm-")) return;
    if (key == "driver") {
      const auto name = trimmed(value);
      if (is_name(name)) {
        out_.driver.assign(name);
      } else {
        ++out_.lines_not_understood;
      }
    } else if (key == "pdev") {
      if (auto address = canonical_pci_address(trimmed(value))) {
        out_.pdev = std::move(*address);
      } else {
        ++out_.lines_not_understood;
      }
    } else if (key == "client-id") {
      understood(out_.client_id = parse_plain_count(value));
    } else if (take_prefix(key, "engine-capacity-")) {
      const auto capacity = parse_plain_count(value);
      if (capacity && *capacity > 0) {  // zero capacity is not allowed by the document
        if (auto* engine = engine_named(key)) engine->capacity = *capacity;
      } else {
        ++out_.lines_not_understood;
      }
    } else if (take_prefix(key, "engine-")) {
      const auto ns = parse_engine_ns(value);
      if (!ns) {
        ++out_.lines_not_understood;
      } else if (auto* engine = engine_named(key)) {
        engine->busy_ns = ns;
      }
    } else if (take_prefix(key, "total-cycles-")) {
      cycles(key, value, &EngineUsage::total_cycles);
    } else if (take_prefix(key, "cycles-")) {
      cycles(key, value, &EngineUsage::cycles);
    } else if (take_prefix(key, "total-")) {
      memory(key, value, &RegionMemory::total);
    } else if (take_prefix(key, "memory-")) {
      memory(key, value, nullptr);
    } else if (take_prefix(key, "shared-")) {
      memory(key, value, &RegionMemory::shared);
    } else if (take_prefix(key, "resident-")) {
      memory(key, value, &RegionMemory::resident);
    } else if (take_prefix(key, "purgeable-")) {
      memory(key, value, &RegionMemory::purgeable);
    } else if (take_prefix(key, "active-")) {
      memory(key, value, &RegionMemory::active);
    }
    // Other drm- keys (drm-maxfreq-*, driver-specific ones) are not used.
  }

 private:
  template <typename T>
  void understood(const std::optional<T>& value) {
    if (!value) ++out_.lines_not_understood;
  }

  void cycles(std::string_view engine_name, std::string_view value, std::optional<std::uint64_t> EngineUsage::*field) {
    const auto count = parse_plain_count(value);
    if (!count) {
      ++out_.lines_not_understood;
    } else if (auto* engine = engine_named(engine_name)) {
      engine->*field = count;
    }
  }

  // field null: drm-memory-<region>, which fills `total` unless drm-total-<region> did.
  void memory(std::string_view region, std::string_view value, std::optional<std::uint64_t> RegionMemory::*field) {
    const auto bytes = parse_memory_value(value);
    if (!bytes) {
      ++out_.lines_not_understood;
      return;
    }
    RegionMemory* memory = region_named(region);
    if (memory == nullptr) return;
    if (field != nullptr) {
      memory->*field = bytes;
      if (field == &RegionMemory::total) memory->total_from_memory_key = false;
    } else if (!memory->total || memory->total_from_memory_key) {
      memory->total = bytes;
      memory->total_from_memory_key = true;
    }
  }

  RegionMemory* region_named(std::string_view name) {
    return entry_named(out_.regions, &RegionMemory::region, kMaxRegions, name);
  }
  EngineUsage* engine_named(std::string_view name) {
    return entry_named(out_.engines, &EngineUsage::engine, kMaxEngines, name);
  }

  // The entry of `entries` whose `key` is `name`, added when new; null (and the line counted as
  // not understood) for a name that is not a <keystr> or past `limit` entries.
  template <typename Entry>
  Entry* entry_named(std::vector<Entry>& entries, std::string Entry::*key, std::size_t limit, std::string_view name) {
    if (!is_name(name)) {
      ++out_.lines_not_understood;
      return nullptr;
    }
    for (auto& entry : entries) {
      if (entry.*key == name) return &entry;
    }
    if (entries.size() >= limit) {
      ++out_.lines_not_understood;
      return nullptr;
    }
    (entries.emplace_back().*key).assign(name);
    return &entries.back();
  }

  DrmFdinfo& out_;
};

}  // namespace

const RegionMemory* DrmFdinfo::region(std::string_view name) const {
  for (const auto& r : regions) {
    if (r.region == name) return &r;
  }
  return nullptr;
}

const EngineUsage* DrmFdinfo::engine(std::string_view name) const {
  for (const auto& e : engines) {
    if (e.engine == name) return &e;
  }
  return nullptr;
}

std::optional<DrmFdinfo> parse_drm_fdinfo(std::string_view text) {
  DrmFdinfo record;
  if (text.size() > kMaxFdinfoBytes) {
    text = text.substr(0, kMaxFdinfoBytes);
    record.cut = true;
  }
  Builder builder(record);
  AmdgpuLegacyFdinfo legacy;
  while (!text.empty()) {
    const auto end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    legacy.line(key, line.substr(colon + 1));  // its keys may hold a blank ("vram mem")
    if (key.empty() || std::any_of(key.begin(), key.end(), [](char c) { return drm::is_blank(c); })) continue;
    builder.line(key, line.substr(colon + 1));
  }
  if (record.driver.empty()) {
    auto old = legacy.record();
    if (old) old->cut = record.cut;
    return old;
  }
  return record;
}

bool is_device_memory_region(std::string_view region) {
  for (const std::string_view prefix : {std::string_view("vram"), std::string_view("local")}) {
    if (region.substr(0, prefix.size()) != prefix) continue;
    const auto rest = region.substr(prefix.size());
    if (std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; })) return true;
  }
  return false;
}

namespace {
std::optional<std::uint64_t> device_sum(const DrmFdinfo& record, std::optional<std::uint64_t> RegionMemory::*field) {
  std::optional<std::uint64_t> sum;
  for (const auto& region : record.regions) {
    if (!is_device_memory_region(region.region) || !(region.*field)) continue;
    const std::uint64_t add = *(region.*field);
    const std::uint64_t so_far = sum.value_or(0);
    sum = so_far + add < so_far ? UINT64_MAX : so_far + add;  // saturate: a lie never wraps to small
  }
  return sum;
}
}  // namespace

std::optional<std::uint64_t> device_memory_bytes(const DrmFdinfo& record) {
  return device_sum(record, &RegionMemory::total);
}

std::optional<std::uint64_t> shared_device_bytes(const DrmFdinfo& record) {
  return device_sum(record, &RegionMemory::shared);
}

std::optional<std::string> canonical_pci_address(std::string_view text) {
  // dddd:bb:dd.f
  if (text.size() != 12 || text[4] != ':' || text[7] != ':' || text[10] != '.') return std::nullopt;
  std::string out(text);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i == 4 || i == 7 || i == 10) continue;
    if (!is_hex(out[i])) return std::nullopt;
    if (out[i] >= 'A' && out[i] <= 'F') out[i] = static_cast<char>(out[i] - 'A' + 'a');
  }
  if (out[11] > '7') return std::nullopt;  // a PCI function is 0-7
  return out;
}

}  // namespace gpureap::drm
