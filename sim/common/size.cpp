#include "common/size.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>

namespace gpusim {

static bool ieq(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

Result<std::uint64_t> parse_size(std::string_view text) {
  std::string_view t = text;
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.front()))) t.remove_prefix(1);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.remove_suffix(1);
  auto bad = [&](const char* why) {
    return Error{"invalid size '" + std::string(text) + "': " + why +
                 " (use bytes or a KiB/MiB/GiB/TiB suffix, e.g. 512MiB)"};
  };
  std::size_t i = 0;
  std::uint64_t whole = 0;
  bool any_digit = false;
  for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i) {
    unsigned d = static_cast<unsigned>(t[i] - '0');
    if (whole > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return bad("too large");
    whole = whole * 10 + d;
    any_digit = true;
  }
  // Optional fraction, only meaningful with a unit ("1.5GiB").
  std::uint64_t frac_num = 0, frac_den = 1;
  if (i < t.size() && t[i] == '.') {
    ++i;
    for (; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])); ++i) {
      if (frac_den < 1000000000ULL) {
        frac_num = frac_num * 10 + static_cast<unsigned>(t[i] - '0');
        frac_den *= 10;
      }
      any_digit = true;
    }
  }
  if (!any_digit) return bad("no number");
  std::string_view unit = t.substr(i);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.remove_prefix(1);
  std::uint64_t mult = 1;
  if (unit.empty() || ieq(unit, "b")) {
    mult = 1;
  } else if (ieq(unit, "k") || ieq(unit, "kb") || ieq(unit, "kib")) {
    mult = 1ULL << 10;
  } else if (ieq(unit, "m") || ieq(unit, "mb") || ieq(unit, "mib")) {
    mult = 1ULL << 20;
  } else if (ieq(unit, "g") || ieq(unit, "gb") || ieq(unit, "gib")) {
    mult = 1ULL << 30;
  } else if (ieq(unit, "t") || ieq(unit, "tb") || ieq(unit, "tib")) {
    mult = 1ULL << 40;
  } else {
    return bad("unknown unit");
  }
  if (frac_num != 0 && mult == 1) return bad("fractional bytes");
  if (whole > std::numeric_limits<std::uint64_t>::max() / mult) return bad("too large");
  std::uint64_t bytes = whole * mult;
  std::uint64_t extra = frac_num * (mult / frac_den) + (frac_num * (mult % frac_den)) / frac_den;
  if (bytes > std::numeric_limits<std::uint64_t>::max() - extra) return bad("too large");
  return bytes + extra;
}

std::string format_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

}  // namespace gpusim
