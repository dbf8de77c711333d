#include "common/config.hpp"

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/file_io.hpp"

namespace gpusim {

using nlohmann::json;

std::string Gpu::pci_bus_id() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08X:%02X:%02X.0", pci_domain, pci_bus, pci_device);
  return buf;
}

std::string Gpu::pci_bus_id_legacy() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04X:%02X:%02X.0", pci_domain, pci_bus, pci_device);
  return buf;
}

static json to_json(const MigInstance& m) {
  return json{{"gi", m.gi},
              {"ci", m.ci},
              {"name", m.name},
              {"uuid", m.uuid},
              {"memory_total", m.memory_total},
              {"cap_gi_minor", m.cap_gi_minor},
              {"cap_ci_minor", m.cap_ci_minor}};
}

json gpu_knobs_json(const Gpu& g) {
  return json{{"lost", g.lost},
              {"no_permission", g.no_permission},
              {"memory_not_available", g.memory_not_available},
              {"temperature", g.temperature},
              {"power_mw", g.power_mw},
              {"util_gpu", g.util_gpu},
              {"util_mem", g.util_mem},
              {"persistence", g.persistence},
              {"compute_mode", g.compute_mode},
              {"fan_speed", g.fan_speed},
              {"pstate", g.pstate},
              {"power_limit_mw", g.power_limit_mw},
              {"enforced_power_limit_mw", g.enforced_power_limit_mw},
              {"ecc", g.ecc},
              {"ecc_corrected", g.ecc_corrected},
              {"ecc_uncorrected", g.ecc_uncorrected},
              {"util_enc", g.util_enc},
              {"util_dec", g.util_dec},
              {"display_active", g.display_active},
              {"release_delay_ms", g.release_delay_ms},
              {"mig_enabled", g.mig_enabled}};
}

static json to_json(const Gpu& g) {
  json mig = json::array();
  for (const auto& m : g.mig) mig.push_back(to_json(m));
  json j{{"name", g.name},
         {"uuid", g.uuid},
         {"pci", {{"domain", g.pci_domain},
                  {"bus", g.pci_bus},
                  {"device", g.pci_device},
                  {"device_id", g.pci_device_id},
                  {"subsystem_id", g.pci_subsystem_id}}},
         {"minor", g.minor},
         {"memory_total", g.memory_total},
         {"memory_reserved", g.memory_reserved},
         {"base_used", g.base_used},
         {"mig", mig}};
  j.update(gpu_knobs_json(g));
  return j;
}

// Optional keys keep their defaults, so hand-written configs can be short.
template <class T>
static void opt(const json& j, const char* key, T& out) {
  auto it = j.find(key);
  if (it != j.end() && !it->is_null()) out = it->get<T>();
}

static MigInstance mig_from_json(const json& j) {
  MigInstance m;
  m.gi = j.at("gi").get<unsigned>();
  opt(j, "ci", m.ci);
  opt(j, "name", m.name);
  opt(j, "uuid", m.uuid);
  m.memory_total = j.at("memory_total").get<std::uint64_t>();
  opt(j, "cap_gi_minor", m.cap_gi_minor);
  opt(j, "cap_ci_minor", m.cap_ci_minor);
  return m;
}

static Gpu gpu_from_json(const json& j) {
  Gpu g;
  g.name = j.at("name").get<std::string>();
  g.uuid = j.at("uuid").get<std::string>();
  if (auto it = j.find("pci"); it != j.end()) {
    opt(*it, "domain", g.pci_domain);
    opt(*it, "bus", g.pci_bus);
    opt(*it, "device", g.pci_device);
    opt(*it, "device_id", g.pci_device_id);
    opt(*it, "subsystem_id", g.pci_subsystem_id);
  }
  g.minor = j.at("minor").get<unsigned>();
  g.memory_total = j.at("memory_total").get<std::uint64_t>();
  opt(j, "memory_reserved", g.memory_reserved);
  opt(j, "base_used", g.base_used);
  opt(j, "lost", g.lost);
  opt(j, "no_permission", g.no_permission);
  opt(j, "memory_not_available", g.memory_not_available);
  opt(j, "temperature", g.temperature);
  opt(j, "power_mw", g.power_mw);
  opt(j, "util_gpu", g.util_gpu);
  opt(j, "util_mem", g.util_mem);
  opt(j, "persistence", g.persistence);
  opt(j, "compute_mode", g.compute_mode);
  opt(j, "fan_speed", g.fan_speed);
  opt(j, "pstate", g.pstate);
  opt(j, "power_limit_mw", g.power_limit_mw);
  opt(j, "enforced_power_limit_mw", g.enforced_power_limit_mw);
  opt(j, "ecc", g.ecc);
  opt(j, "ecc_corrected", g.ecc_corrected);
  opt(j, "ecc_uncorrected", g.ecc_uncorrected);
  opt(j, "util_enc", g.util_enc);
  opt(j, "util_dec", g.util_dec);
  opt(j, "display_active", g.display_active);
  opt(j, "release_delay_ms", g.release_delay_ms);
  opt(j, "mig_enabled", g.mig_enabled);
  if (auto it = j.find("mig"); it != j.end()) {
    for (const auto& m : *it) g.mig.push_back(mig_from_json(m));
  }
  return g;
}

Result<Config> parse_config(const std::string& json_text) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Error{"config.json is not a JSON object"};
  try {
    Config c;
    for (const auto& g : j.at("gpus")) c.gpus.push_back(gpu_from_json(g));
    if (auto it = j.find("faults"); it != j.end()) {
      for (const auto& f : *it) {
        Fault fault;
        fault.call = f.at("call").get<std::string>();
        fault.code = f.at("code").get<int>();
        if (auto g = f.find("gpu"); g != f.end() && !g->is_null()) fault.gpu = g->get<unsigned>();
        fault.hang_ms = f.value("hang_ms", 0u);
        c.faults.push_back(std::move(fault));
      }
    }
    if (c.gpus.size() > kMaxGpus) return Error{"config.json: more than 32 GPUs"};
    for (const auto& g : c.gpus) {
      if (g.mig.size() > kMaxMigSlots) return Error{"config.json: more than 7 MIG instances on a GPU"};
    }
    return c;
  } catch (const std::exception& e) {
    return Error{std::string("config.json: ") + e.what()};
  }
}

std::string serialize_config(const Config& config) {
  json gpus = json::array();
  for (const auto& g : config.gpus) gpus.push_back(to_json(g));
  json faults = json::array();
  for (const auto& f : config.faults) {
    faults.push_back(json{{"call", f.call}, {"code", f.code},
                          {"gpu", f.gpu ? json(*f.gpu) : json(nullptr)}, {"hang_ms", f.hang_ms}});
  }
  return json{{"version", 1}, {"gpus", gpus}, {"faults", faults}}.dump(2) + "\n";
}

Result<Config> load_config(const std::string& path) {
  ReadResult r = read_file(path);
  if (!r.ok()) return Error{r.error.message};
  return parse_config(r.data);
}

Status save_config(const std::string& path, const Config& config) {
  return write_file_atomic(path, serialize_config(config), 0666);
}

bool fault_matches(const std::string& fault_call, const char* symbol) {
  if (fault_call.empty()) return false;
  std::size_t n = fault_call.size();
  if (fault_call.back() == '*') return std::strncmp(symbol, fault_call.data(), n - 1) == 0;
  if (std::strncmp(symbol, fault_call.data(), n) != 0) return false;
  const char* rest = symbol + n;
  if (*rest == '\0') return true;
  if (fault_call == "nvmlInit" && std::strcmp(rest, "WithFlags") == 0) return true;
  // A versioned variant: "_v" followed by digits only.
  if (rest[0] != '_' || rest[1] != 'v' || rest[2] == '\0') return false;
  for (const char* p = rest + 2; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
  }
  return true;
}

const Fault* find_fault(const Config& config, const char* symbol, std::optional<unsigned> gpu) {
  for (const auto& f : config.faults) {
    if (f.gpu && f.gpu != gpu) continue;
    if (fault_matches(f.call, symbol)) return &f;
  }
  return nullptr;
}

}  // namespace gpusim
