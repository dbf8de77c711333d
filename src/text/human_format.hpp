// Numbers as a person reads them: sizes in binary units, durations, percentages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpureap {

std::string format_bytes(std::uint64_t bytes);                    // "12.0 GiB", "512 MiB", "0 B"
std::string format_bytes(const std::optional<std::uint64_t>& bytes);  // "?" when unknown
std::string format_duration(double seconds);                       // "45s", "12m03s", "2h03m", "3d04h"
// The same with hundredths below ten seconds, for settings that may be that short: "0.05s", "2.5s".
std::string format_short_duration(double seconds);
// A bar of `width` cells: filled share used/total, e.g. "██████░░░░".
std::string format_bar(std::uint64_t used, std::uint64_t total, int width);
std::string format_cuda_version(int version);                       // 12040 -> "12.4"

}  // namespace gpureap
