// The numbers of DRM fdinfo (the kernel's Documentation/gpu/drm-usage-stats.rst): an unsigned
// decimal integer with an optional unit. Hand parsed: no locale, no allocation, no backtracking.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpureap::drm {

// A memory value in bytes: "<uint>", "<uint> KiB" or "<uint> MiB" as the document defines
// them, and "<uint> GiB", which no driver prints yet but the units allow. A bare number is
// bytes (amdxdna prints its memory so). nullopt for anything else, and for a value that does
// not fit in 64 bits once multiplied out.
std::optional<std::uint64_t> parse_memory_value(std::string_view value);

// An engine's busy time: "<uint> ns". The unit is required: drm-engine-* values without it
// are not times (drm-engine-capacity-* is a count and is parsed with parse_plain_count).
std::optional<std::uint64_t> parse_engine_ns(std::string_view value);

// A memory value of amdgpu's fdinfo before Linux 5.19 ("vram mem:\t%llu kB", the bytes divided
// by 1024: its "kB" is KiB), in bytes; nullopt for anything else and for what does not fit.
std::optional<std::uint64_t> parse_amdgpu_legacy_kb(std::string_view value);

// A bare unsigned count ("<uint>", nothing after it): client ids, capacities, cycles.
std::optional<std::uint64_t> parse_plain_count(std::string_view value);

}  // namespace gpureap::drm
