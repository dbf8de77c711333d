// nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits], answered through NVML.
#include <fmt/core.h>

#include <functional>
#include <map>

#include "smi/nvml_session.hpp"

namespace gpusim::smi {

namespace {

using StringFn = nvmlReturn_t(nvmlDevice_t, char*, unsigned);
using EnableStateFn = nvmlReturn_t(nvmlDevice_t, nvmlEnableState_t*);
using MemoryFn = nvmlReturn_t(nvmlDevice_t, nvmlMemory_t*);
using MemoryV2Fn = nvmlReturn_t(nvmlDevice_t, nvmlMemory_v2_t*);

struct Memory {
  nvmlReturn_t rc = NVML_SUCCESS;
  unsigned long long total = 0, used = 0, free = 0;
};

// _v2 where the driver has it (used excludes the reserved memory), as current nvidia-smi does.
Memory memory_of(const NvmlSession& s, nvmlDevice_t dev) {
  Memory m;
  if (auto* v2 = s.fn<MemoryV2Fn>("nvmlDeviceGetMemoryInfo_v2")) {
    nvmlMemory_v2_t out{};
    out.version = nvmlMemory_v2;
    m.rc = v2(dev, &out);
    m.total = out.total;
    m.used = out.used;
    m.free = out.free;
  } else {
    nvmlMemory_t out{};
    auto* v1 = s.fn<MemoryFn>("nvmlDeviceGetMemoryInfo");
    m.rc = v1 != nullptr ? v1(dev, &out) : NVML_ERROR_FUNCTION_NOT_FOUND;
    m.total = out.total;
    m.used = out.used;
    m.free = out.free;
  }
  return m;
}

struct Field {
  bool has_unit;
  std::function<std::string(const NvmlSession&, const SelectedGpu&, bool units)> value;
};

std::string memory_field(const NvmlSession& s, const SelectedGpu& g, bool units,
                         unsigned long long Memory::*part) {
  Memory m = memory_of(s, g.handle);
  return m.rc == NVML_SUCCESS ? mib(m.*part, units) : s.field_error(m.rc);
}

const std::map<std::string, Field>& fields() {
  static const std::map<std::string, Field> table = {
      {"index", {false, [](const NvmlSession&, const SelectedGpu& g, bool) { return std::to_string(g.index); }}},
      {"uuid", {false, [](const NvmlSession&, const SelectedGpu& g, bool) { return g.uuid; }}},
      {"pci.bus_id", {false, [](const NvmlSession&, const SelectedGpu& g, bool) { return g.bus_id; }}},
      {"name",
       {false,
        [](const NvmlSession& s, const SelectedGpu& g, bool) {
          char name[96] = {};
          auto* f = s.fn<StringFn>("nvmlDeviceGetName");
          nvmlReturn_t rc = f != nullptr ? f(g.handle, name, sizeof name) : NVML_ERROR_FUNCTION_NOT_FOUND;
          return rc == NVML_SUCCESS ? std::string(name) : s.field_error(rc);
        }}},
      {"persistence_mode",
       {false,
        [](const NvmlSession& s, const SelectedGpu& g, bool) {
          nvmlEnableState_t mode = NVML_FEATURE_DISABLED;
          auto* f = s.fn<EnableStateFn>("nvmlDeviceGetPersistenceMode");
          nvmlReturn_t rc = f != nullptr ? f(g.handle, &mode) : NVML_ERROR_FUNCTION_NOT_FOUND;
          if (rc != NVML_SUCCESS) return s.field_error(rc);
          return std::string(mode == NVML_FEATURE_ENABLED ? "Enabled" : "Disabled");
        }}},
      {"memory.total",
       {true, [](const NvmlSession& s, const SelectedGpu& g, bool u) { return memory_field(s, g, u, &Memory::total); }}},
      {"memory.used",
       {true, [](const NvmlSession& s, const SelectedGpu& g, bool u) { return memory_field(s, g, u, &Memory::used); }}},
      {"memory.free",
       {true, [](const NvmlSession& s, const SelectedGpu& g, bool u) { return memory_field(s, g, u, &Memory::free); }}},
  };
  return table;
}

}  // namespace

int run_query_gpu(const Request& req) {
  std::vector<std::string> header;
  for (const std::string& f : req.fields) {
    auto it = fields().find(f);
    if (it == fields().end()) {
      fmt::print("Field \"{}\" is not a valid field to query.\n\n", f);
      return kExitInvalidArgument;
    }
    header.push_back(f + (it->second.has_unit && req.units ? " [MiB]" : ""));
  }
  int status = kExitOk;
  auto session = NvmlSession::open(&status);
  if (!session) return status;
  auto gpus = session->select(req.id, &status);
  if (!gpus) return status;
  std::vector<std::vector<std::string>> rows;
  for (const SelectedGpu& g : *gpus) {
    std::vector<std::string> row;
    for (const std::string& f : req.fields) row.push_back(fields().at(f).value(*session, g, req.units));
    rows.push_back(std::move(row));
  }
  print_csv(header, rows, req.header);
  return kExitOk;
}

}  // namespace gpusim::smi
