// Sizes as people write them in configuration files: "2GiB", "512MiB", "1.5GiB", "4096".
// The duration parser's rules apply: plain decimal digits only (no sign, exponent, spaces,
// "nan" or "inf"), then an optional binary unit, and a bound.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpureap {

// Bytes in "4096", "4096B", "512KiB", "2MiB", "1.5GiB", "1TiB" (K, KB, M, MB, G, GB, T, TB mean
// the binary units too, as nvidia-smi's MiB figures do); nullopt when malformed or above
// max_bytes, with the reason (one phrase) in *why. Fractions are rounded down to whole bytes.
std::optional<std::uint64_t> parse_byte_size(std::string_view text, std::uint64_t max_bytes,
                                             std::string* why = nullptr);

}  // namespace gpureap
