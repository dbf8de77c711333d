#include "doctor/event_age.hpp"

#include <fcntl.h>

#include <cctype>
#include <charconv>
#include <ctime>
#include <string>
#include <string_view>

#include "proc/parse_util.hpp"
#include "proc/proc_io.hpp"

namespace gpureap {
namespace {

bool digits(std::string_view text, std::size_t at, std::size_t n, int& out) {
  if (at + n > text.size()) return false;
  out = 0;
  for (std::size_t i = at; i < at + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return false;
    out = out * 10 + (text[i] - '0');
  }
  return true;
}

}  // namespace

std::optional<double> parse_iso8601(std::string_view text) {
  int year, month, day, hour, minute, second;
  if (!digits(text, 0, 4, year) || text.size() < 19 || text[4] != '-' || !digits(text, 5, 2, month) ||
      text[7] != '-' || !digits(text, 8, 2, day) || (text[10] != 'T' && text[10] != ' ') ||
      !digits(text, 11, 2, hour) || text[13] != ':' || !digits(text, 14, 2, minute) || text[16] != ':' ||
      !digits(text, 17, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  std::size_t at = 19;
  double fraction = 0;
  if (at < text.size() && (text[at] == '.' || text[at] == ',')) {
    double scale = 0.1;
    ++at;
    const std::size_t start = at;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) {
      fraction += (text[at] - '0') * scale;
      scale /= 10;
      ++at;
    }
    if (at == start) return std::nullopt;
  }
  if (at >= text.size()) return std::nullopt;  // no offset: the zone is unknown
  int offset = 0;
  if (text[at] == 'Z') {
    ++at;
  } else if (text[at] == '+' || text[at] == '-') {
    const int sign = text[at] == '-' ? -1 : 1;
    int oh, om;
    if (!digits(text, at + 1, 2, oh)) return std::nullopt;
    std::size_t m = at + 3;
    if (m < text.size() && text[m] == ':') ++m;
    if (!digits(text, m, 2, om) || oh > 23 || om > 59) return std::nullopt;
    offset = sign * (oh * 3600 + om * 60);
    at = m + 2;
  } else {
    return std::nullopt;
  }
  if (at < text.size() && !std::isspace(static_cast<unsigned char>(text[at]))) return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  const std::time_t utc = timegm(&tm);
  if (utc == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<double>(utc - offset) + fraction;
}

std::optional<double> uptime_seconds(const char* proc_root) {
  const std::string path = std::string(proc_root) + "/uptime";
  procfs::ReadBuffer buffer(256);
  auto text = buffer.read_proc_file_at(AT_FDCWD, path.c_str(), 256);
  if (!text) return std::nullopt;
  // "<seconds up> <seconds idle>\n", in the C locale whatever ours is.
  const std::string_view up = procfs::take_token(*text);
  double seconds = 0;
  const auto [end, error] = std::from_chars(up.data(), up.data() + up.size(), seconds);
  if (error != std::errc() || end != up.data() + up.size() || up.empty()) return std::nullopt;
  return seconds;
}

}  // namespace gpureap
