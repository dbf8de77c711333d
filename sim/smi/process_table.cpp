// `nvidia-smi` without a query: the Processes table of its default output (the GPU table above
// it is not simulated). Type is what the driver's lists say of each PID: C (compute), G
// (graphics), M (an MPS client, listed by the MPS call), and C+G or M+C for both.
#include <fmt/core.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "smi/process_lists.hpp"

namespace gpusim::smi {

namespace {

struct TypedRow {
  bool compute = false, graphics = false, mps = false;
  unsigned long long used = 0;
};

std::string type_of(const TypedRow& r) {
  if (r.mps) return r.compute ? "M+C" : "M";
  if (r.compute && r.graphics) return "C+G";
  return r.compute ? "C" : "G";
}

}  // namespace

int run_process_table(const Request& req) {
  int status = kExitOk;
  auto session = NvmlSession::open(&status);
  if (!session) return status;
  auto gpus = session->select(req.id, &status);
  if (!gpus) return status;
  using ProcessNameFn = nvmlReturn_t(unsigned, char*, unsigned);
  auto* name_of = session->fn<ProcessNameFn>("nvmlSystemGetProcessName");
  const std::string rule(89, '-');
  fmt::print("+{}+\n", rule);
  fmt::print("| {:<88}|\n", "Processes:");
  fmt::print("| {:<88}|\n", " GPU   GI   CI        PID   Type   Process name                              GPU Memory");
  fmt::print("| {:<88}|\n", "       ID   ID                                                               Usage");
  fmt::print("|{}|\n", std::string(89, '='));
  bool any = false;
  for (const SelectedGpu& g : *gpus) {
    std::map<unsigned, TypedRow> rows;
    for (ProcessList list : {ProcessList::Compute, ProcessList::Graphics, ProcessList::Mps}) {
      std::vector<nvmlProcessInfo_v2_t> recs;
      nvmlReturn_t rc = read_process_list(*session, g.handle, list, &recs);
      if (rc == NVML_ERROR_FUNCTION_NOT_FOUND && list == ProcessList::Mps) continue;  // older drivers
      if (rc != NVML_SUCCESS) {
        fmt::print(stderr, "Unable to query processes of GPU {}: {}\n", g.bus_id, session->nvml().error_string(rc));
        status = exit_status_for(rc);
        continue;
      }
      for (const auto& rec : recs) {
        TypedRow& r = rows[rec.pid];
        (list == ProcessList::Compute ? r.compute : list == ProcessList::Graphics ? r.graphics : r.mps) = true;
        r.used = rec.usedGpuMemory;
      }
    }
    for (const auto& [pid, r] : rows) {
      char name[1024] = {};
      if (name_of == nullptr || name_of(pid, name, sizeof name) != NVML_SUCCESS) std::snprintf(name, sizeof name, "N/A");
      std::string shown(name);
      if (shown.size() > 38) shown = "..." + shown.substr(shown.size() - 35);
      const std::string mem = r.used == NVML_VALUE_NOT_AVAILABLE_ULL ? "N/A" : fmt::format("{}MiB", r.used >> 20);
      fmt::print("| {:>4}   N/A  N/A  {:>9}  {:>5}   {:<38}  {:>10} |\n", g.index, pid, type_of(r), shown, mem);
      any = true;
    }
  }
  if (!any) fmt::print("| {:<88}|\n", " No running processes found");
  fmt::print("+{}+\n", rule);
  return status;
}

}  // namespace gpusim::smi
