// nvidia-smi --query-compute-apps=FIELDS --format=csv[,noheader][,nounits]: one row per record
// of each GPU's compute process list, exactly as NVML returns it.
#include <fmt/core.h>

#include <cstring>
#include <map>

#include "smi/nvml_session.hpp"
#include "smi/process_lists.hpp"

namespace gpusim::smi {

namespace {

using ProcessNameFn = nvmlReturn_t(unsigned, char*, unsigned);

struct Row {
  const SelectedGpu* gpu;
  nvmlProcessInfo_v2_t rec;
};

// Real field names; the aliases nvidia-smi accepts map to them.
const std::map<std::string, std::string>& canonical() {
  static const std::map<std::string, std::string> names = {
      {"pid", "pid"},
      {"process_name", "process_name"},
      {"name", "process_name"},
      {"used_gpu_memory", "used_gpu_memory"},
      {"used_memory", "used_gpu_memory"},
      {"gpu_uuid", "gpu_uuid"},
      {"gpu_bus_id", "gpu_bus_id"},
  };
  return names;
}

std::string value(const NvmlSession& s, const Row& r, const std::string& field, bool units) {
  if (field == "pid") return std::to_string(r.rec.pid);
  if (field == "gpu_uuid") return r.gpu->uuid;
  if (field == "gpu_bus_id") return r.gpu->bus_id;
  if (field == "used_gpu_memory") {
    if (r.rec.usedGpuMemory == NVML_VALUE_NOT_AVAILABLE_ULL) return "[N/A]";
    return mib(r.rec.usedGpuMemory, units);
  }
  char name[1024] = {};
  auto* f = s.fn<ProcessNameFn>("nvmlSystemGetProcessName");
  nvmlReturn_t rc = f != nullptr ? f(r.rec.pid, name, sizeof name) : NVML_ERROR_FUNCTION_NOT_FOUND;
  return rc == NVML_SUCCESS ? std::string(name) : s.field_error(rc);
}

}  // namespace

int run_query_compute_apps(const Request& req) {
  std::vector<std::string> names, header;
  for (const std::string& f : req.fields) {
    auto it = canonical().find(f);
    if (it == canonical().end()) {
      fmt::print("Field \"{}\" is not a valid field to query.\n\n", f);
      return kExitInvalidArgument;
    }
    names.push_back(it->second);
    header.push_back(it->second + (it->second == "used_gpu_memory" && req.units ? " [MiB]" : ""));
  }
  int status = kExitOk;
  auto session = NvmlSession::open(&status);
  if (!session) return status;
  auto gpus = session->select(req.id, &status);
  if (!gpus) return status;
  std::vector<Row> rows;
  for (const SelectedGpu& g : *gpus) {
    std::vector<nvmlProcessInfo_v2_t> recs;
    nvmlReturn_t rc = read_process_list(*session, g.handle, ProcessList::Compute, &recs);
    if (rc != NVML_SUCCESS) {
      // The other GPUs are still listed; the status tells the caller something is missing.
      fmt::print(stderr, "Unable to query compute processes of GPU {}: {}\n", g.bus_id,
                 session->nvml().error_string(rc));
      status = exit_status_for(rc);
      continue;
    }
    for (const auto& rec : recs) rows.push_back({&g, rec});
  }
  std::vector<std::vector<std::string>> cells;
  for (const Row& r : rows) {
    std::vector<std::string> row;
    for (const std::string& n : names) row.push_back(value(*session, r, n, req.units));
    cells.push_back(std::move(row));
  }
  print_csv(header, cells, req.header);
  return status;
}

}  // namespace gpusim::smi
