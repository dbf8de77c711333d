#include "cli/common/gpu_choice.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "cli/common/exit_codes.hpp"
#include "cli/common/snapshot_status.hpp"
#include "doctor/xid_event.hpp"
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

// Every GPU of the host as the error names them: NVML indices, then PCI addresses.
std::string known_gpus(const Snapshot& snapshot) {
  std::string out;
  for (const auto& g : snapshot.gpus) out += fmt::format("{}{}", out.empty() ? "" : ", ", g.reading.index);
  for (const auto& d : snapshot.drm.devices) out += fmt::format("{}{}", out.empty() ? "" : ", ", d.pci_address);
  return out.empty() ? "none" : out;
}

// The same function of the same device: a PCI address names one function.
bool same_function(const PciLocation& a, const PciLocation& b) {
  return same_pci_device(a, b) && a.function.value_or(0) == b.function.value_or(0);
}

// Reads the items of --gpu into a choice; each add_ returns false once it has set the error.
struct GpuChoiceReader {
  const Snapshot& snapshot;
  const std::string& option;
  GpuChoiceError& error;
  GpuChoice out;

  bool fail(std::string_view item, const std::string& why) {
    error.message = fmt::format("{} {}: {}", option, sanitize_for_terminal(std::string(item.substr(0, 64))), why);
    return false;
  }

  bool fail_without_nvml(std::string_view item) {
    error.needs_nvidia_library = true;
    if (snapshot.driver.no_nvidia_gpus()) {
      return fail(item, fmt::format("GPU indices and UUIDs name NVIDIA GPUs, and this host has none; name a GPU by its "
                                    "PCI address (this host has: {})",
                                    known_gpus(snapshot)));
    }
    return fail(item, fmt::format("GPU indices and UUIDs are NVIDIA's, and NVIDIA's library is not loaded here ({}); "
                                  "an AMD or Intel GPU is named by its PCI address (this host has: {})",
                                  sanitize_for_terminal(snapshot.driver.message), known_gpus(snapshot)));
  }

  bool index_exists(unsigned index) const { return snapshot.gpu_by_index(index) != nullptr; }

  // A PCI address; "bb:dd.f" is in domain 0. It may name an NVIDIA GPU, a DRM one, or both.
  bool add_pci_address(std::string_view item) {
    const std::string text = std::count(item.begin(), item.end(), ':') == 1 ? "0000:" + std::string(item) : std::string(item);
    const auto wanted = parse_pci_bus_id(text);
    if (!wanted || !wanted->function) return fail(item, "not a PCI address (0000:c1:00.0)");
    bool found = false;
    for (const auto& g : snapshot.gpus) {
      const auto at = parse_pci_bus_id(g.reading.pci_bus_id);
      if (!at || !same_function(*at, *wanted)) continue;
      out.nvidia.insert(g.reading.index);
      found = true;
    }
    for (const auto& d : snapshot.drm.devices) {
      const auto at = parse_pci_bus_id(d.pci_address);
      if (!at || !same_function(*at, *wanted)) continue;
      out.drm.insert(d.pci_address);
      found = true;
    }
    if (!found) return fail(item, fmt::format("no GPU at that PCI address (this host has: {})", known_gpus(snapshot)));
    return true;
  }

  // A UUID or a prefix of one that names a single GPU.
  bool add_uuid(std::string_view item) {
    if (!snapshot.driver.loaded) return fail_without_nvml(item);
    const std::string wanted = lower(item);
    std::vector<unsigned> matches;
    for (const auto& g : snapshot.gpus) {
      if (lower(g.reading.uuid).rfind(wanted, 0) == 0) matches.push_back(g.reading.index);
    }
    if (matches.empty()) return fail(item, "no GPU on this host has that UUID (see `gpureap ps`)");
    if (matches.size() > 1) return fail(item, "that UUID prefix names more than one GPU");
    out.nvidia.insert(matches.front());
    return true;
  }

  bool add_index_range(std::string_view item, std::size_t dash) {
    unsigned first = 0, last = 0;
    if (!parse_index(item.substr(0, dash), first) || !parse_index(item.substr(dash + 1), last) || first > last) {
      return fail(item, "not a GPU index, range (2-3), UUID (GPU-...) or PCI address (0000:c1:00.0)");
    }
    if (!snapshot.driver.loaded) return fail_without_nvml(item);
    for (unsigned i = first; i <= last; ++i) {
      if (!index_exists(i)) return fail(item, fmt::format("no GPU {} on this host (it has: {})", i, known_gpus(snapshot)));
      out.nvidia.insert(i);
    }
    return true;
  }

  bool add_index(std::string_view item) {
    unsigned index = 0;
    if (!parse_index(item, index)) {
      return fail(item, "not a GPU index, range (2-3), UUID (GPU-...) or PCI address (0000:c1:00.0)");
    }
    if (!snapshot.driver.loaded) return fail_without_nvml(item);
    if (!index_exists(index)) return fail(item, fmt::format("no such GPU (this host has: {})", known_gpus(snapshot)));
    out.nvidia.insert(index);
    return true;
  }

  bool add_item(std::string_view item) {
    if (item.find(':') != std::string_view::npos) return add_pci_address(item);
    if (item.size() > 4 && (lower(item.substr(0, 4)) == "gpu-" || lower(item.substr(0, 4)) == "mig-")) {
      return add_uuid(item);
    }
    if (const auto dash = item.find('-'); dash != std::string_view::npos) return add_index_range(item, dash);
    return add_index(item);
  }

  // One comma-separated list: every item, none empty.
  bool add_list(const std::string& list) {
    std::string_view rest = list;
    if (rest.empty()) return fail(list, "empty list");
    while (true) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      if (item.empty()) return fail(list, "empty item in the list");
      if (!add_item(item)) return false;
      if (comma == std::string_view::npos) return true;
      rest.remove_prefix(comma + 1);
    }
  }
};

}  // namespace

std::optional<GpuChoice> resolve_gpu_choice(const std::vector<std::string>& items, const Snapshot& snapshot,
                                            const std::string& option, GpuChoiceError& error) {
  GpuChoiceReader reader{snapshot, option, error, {}};
  if (items.empty()) {
    reader.fail("", "empty list");
    return std::nullopt;
  }
  for (const auto& list : items) {
    if (!reader.add_list(list)) return std::nullopt;
  }
  return reader.out;
}

int gpu_choice_error_status(const GpuChoiceError& error, const Snapshot& snapshot) {
  return error.needs_nvidia_library && !snapshot.driver.no_nvidia_gpus() ? driver_failure_status(snapshot)
                                                                        : exit_code::kUsage;
}

}  // namespace gpureap
