// nvidia-smi's command line, as far as it is simulated, and its CSV output.
#include <fmt/core.h>
#include <strings.h>

#include <cctype>
#include <string_view>

#include "smi/smi.hpp"

namespace gpusim::smi {

namespace {

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    auto comma = text.find(',', start);
    std::string item = text.substr(start, comma - start);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front()))) item.erase(0, 1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back()))) item.pop_back();
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// "--name=value" or "--name value"; advances `i` past what it consumed.
std::optional<std::string> option_value(const std::vector<std::string>& args, std::size_t& i,
                                        std::string_view name) {
  const std::string& a = args[i];
  if (a == name) {
    if (i + 1 >= args.size()) return std::nullopt;
    return args[++i];
  }
  if (a.size() > name.size() && a.compare(0, name.size(), name) == 0 && a[name.size()] == '=') {
    return a.substr(name.size() + 1);
  }
  return std::nullopt;
}

bool is_option(const std::string& a, std::string_view name) {
  return a == name || (a.size() > name.size() && a.compare(0, name.size(), name) == 0 && a[name.size()] == '=');
}

}  // namespace

std::optional<Request> parse_args(const std::vector<std::string>& args) {
  Request req;
  bool reset = false;
  std::optional<Mode> query;
  std::optional<std::string> format;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-r" || a == "--gpu-reset") {
      reset = true;
    } else if (a == "-i" || is_option(a, "--id")) {
      auto v = option_value(args, i, a == "-i" ? "-i" : "--id");
      if (!v || v->empty() || req.id) return std::nullopt;
      req.id = *v;
    } else if (is_option(a, "--query-gpu") || is_option(a, "--query-compute-apps")) {
      bool gpu = is_option(a, "--query-gpu");
      auto v = option_value(args, i, gpu ? "--query-gpu" : "--query-compute-apps");
      if (!v || query) return std::nullopt;
      query = gpu ? Mode::QueryGpu : Mode::QueryComputeApps;
      req.fields = split_list(*v);
    } else if (is_option(a, "--format")) {
      format = option_value(args, i, "--format");
      if (!format) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (!reset && !query && !format) {  // no action: the default output (its process table)
    req.mode = Mode::ProcessTable;
    return req;
  }
  if (reset == query.has_value()) return std::nullopt;  // exactly one action
  if (reset) {
    if (format) return std::nullopt;
    req.mode = Mode::Reset;
    return req;
  }
  req.mode = *query;
  if (!format) return std::nullopt;  // only the CSV output is simulated
  bool csv = false;
  for (const std::string& f : split_list(*format)) {
    if (f == "csv") {
      csv = true;
    } else if (f == "noheader") {
      req.header = false;
    } else if (f == "nounits") {
      req.units = false;
    } else {
      return std::nullopt;
    }
  }
  for (const std::string& f : req.fields) {
    if (f.empty()) return std::nullopt;
  }
  if (!csv) return std::nullopt;
  return req;
}

bool id_matches(const std::string& id, unsigned index, const std::string& uuid,
                const std::string& bus_id) {
  if (id == std::to_string(index) || id == uuid) return true;
  // A bus id in full ("00000000:17:00.0") or in the legacy form ("0000:17:00.0").
  if (::strcasecmp(id.c_str(), bus_id.c_str()) == 0) return true;
  return bus_id.size() > 4 && ::strcasecmp(id.c_str(), bus_id.c_str() + 4) == 0;
}

void print_csv(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
               bool with_header) {
  auto line = [](const std::vector<std::string>& cells) {
    std::string out;
    for (const auto& c : cells) out += (out.empty() ? "" : ", ") + c;
    fmt::print("{}\n", out);
  };
  if (with_header) line(header);
  for (const auto& r : rows) line(r);
}

int exit_status_for(int nvml_rc) {
  switch (nvml_rc) {
    case 0: case 2: case 3: case 4: case 6: case 8: case 9: case 10: case 12: case 13: case 14: case 15:
      return nvml_rc;
    default:
      return kExitOther;
  }
}

}  // namespace gpusim::smi
