#include "cli/reap/gpu_list.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "text/sanitize.hpp"

namespace gpureap {
namespace {

bool parse_index(std::string_view text, unsigned& out) {
  if (text.empty() || text.size() > 6) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string known_gpus(const std::vector<GpuReading>& gpus) {
  std::string out;
  for (const auto& g : gpus) out += fmt::format("{}{}", out.empty() ? "" : ", ", g.index);
  return out.empty() ? "none" : out;
}

}  // namespace

std::set<unsigned> resolve_gpu_list(const std::string& list, const std::vector<GpuReading>& gpus, std::string& error) {
  std::set<unsigned> out;
  auto fail = [&](std::string_view item, const std::string& why) {
    error = fmt::format("--gpus {}: {}", sanitize_for_terminal(std::string(item)), why);
    return std::set<unsigned>{};
  };
  auto exists = [&](unsigned index) {
    return std::any_of(gpus.begin(), gpus.end(), [&](const GpuReading& g) { return g.index == index; });
  };
  std::string_view rest = list;
  if (rest.empty()) return fail(list, "empty list");
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if (item.empty()) return fail(list, "empty item in the list");
    if (item.size() > 4 && lower(item.substr(0, 4)) == "gpu-") {
      const std::string wanted = lower(item);
      std::vector<unsigned> matches;
      for (const auto& g : gpus) {
        if (lower(g.uuid).rfind(wanted, 0) == 0) matches.push_back(g.index);
      }
      if (matches.empty()) return fail(item, "no GPU on this host has that UUID (see `gpureap ps`)");
      if (matches.size() > 1) return fail(item, "that UUID prefix names more than one GPU");
      out.insert(matches.front());
    } else if (const auto dash = item.find('-'); dash != std::string_view::npos) {
      unsigned first = 0, last = 0;
      if (!parse_index(item.substr(0, dash), first) || !parse_index(item.substr(dash + 1), last) || first > last) {
        return fail(item, "not a GPU index, range (2-3) or UUID (GPU-...)");
      }
      for (unsigned i = first; i <= last; ++i) {
        if (!exists(i)) return fail(item, fmt::format("no GPU {} on this host (it has: {})", i, known_gpus(gpus)));
        out.insert(i);
      }
    } else {
      unsigned index = 0;
      if (!parse_index(item, index)) return fail(item, "not a GPU index, range (2-3) or UUID (GPU-...)");
      if (!exists(index)) return fail(item, fmt::format("no such GPU (this host has: {})", known_gpus(gpus)));
      out.insert(index);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace gpureap
