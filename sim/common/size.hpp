// Byte sizes as people write them: "1073741824", "512MiB", "80GiB", "1.5GiB", "4096KiB".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace gpusim {

// Accepts a plain byte count or a number followed by B, KiB, MiB, GiB or TiB (binary units;
// KB/MB/GB/TB and K/M/G/T are accepted as the same binary units, case-insensitive).
Result<std::uint64_t> parse_size(std::string_view text);

// "80.00 GiB", "512.00 MiB", "1023 B".
std::string format_size(std::uint64_t bytes);

}  // namespace gpusim
