// Running-process lists: the three families (compute, graphics, MPS) in every record stride
// a driver ever wrote, plus nvmlDeviceGetRunningProcessDetailList.
//
// A context is listed under the PID that created it for as long as it lives: when that owner
// has died and forked inheritors keep the context, its dead PID stays listed with the memory
// (as measured on a real H200). Leaked and releasing memory is in no row.
#include <algorithm>
#include <cstring>

#include "driver/driver_state.hpp"
#include "driver/generation.hpp"

using namespace gpusim;
using namespace gpusim::driver;

namespace {

struct ProcEntry {
  unsigned pid = 0;
  unsigned long long used = 0;
  unsigned gi = NVML_INVALID_INSTANCE_ID;
  unsigned ci = NVML_INVALID_INSTANCE_ID;
};

// One record per (process, instance) that has a context of this kind. The memory is the
// process's whole usage on that device or instance, whatever the kind of each context: the
// driver accounts video memory per process, so a C+G process shows the same figure in the
// compute and the graphics list (summing the two lists would count it twice).
//
// An MPS client's context is listed under the client in the MPS list. A generation without
// that list shows the MPS server as the only CUDA process, holding its clients' memory.
std::vector<ProcEntry> collect(const Target& t, ProcType type, const std::vector<AllocView>& views) {
  std::vector<ProcEntry> out;
  auto folded_into_server = [](const AllocRecord& r) {
    return r.type == ProcType::Mps && r.mps_server_pid != 0 && !kGeneration.lists_mps_clients;
  };
  auto type_of = [&](const AllocRecord& r) { return folded_into_server(r) ? ProcType::Compute : r.type; };
  auto key_of = [&](const AllocRecord& r) {
    ProcEntry e;
    e.pid = folded_into_server(r) ? r.mps_server_pid : r.owner_pid;
    if (t.gpu->mig_enabled && r.gi) {
      e.gi = *r.gi;
      e.ci = r.ci;
    }
    return e;
  };
  auto on_target = [&](const AllocView& v) {
    const AllocRecord& r = v.rec;
    return v.listed() && r.gpu == t.gpu_index && !(t.is_mig() && r.gi != t.mig->gi);
  };
  for (const auto& v : views) {
    if (!on_target(v) || type_of(v.rec) != type) continue;
    const ProcEntry e = key_of(v.rec);
    auto same = [&](const ProcEntry& x) { return x.pid == e.pid && x.gi == e.gi && x.ci == e.ci; };
    if (std::find_if(out.begin(), out.end(), same) == out.end()) out.push_back(e);
  }
  for (const auto& v : views) {
    if (!on_target(v)) continue;
    const ProcEntry e = key_of(v.rec);
    for (auto& x : out) {
      if (x.pid == e.pid && x.gi == e.gi && x.ci == e.ci) x.used += v.rec.bytes;
    }
  }
  if (t.gpu->memory_not_available) {
    for (auto& e : out) e.used = NVML_VALUE_NOT_AVAILABLE_ULL;
  }
  return out;
}

// The shorter records are prefixes of the 32-byte one, so one image serves every stride.
void write_record(void* base, std::size_t index, std::size_t stride, const ProcEntry& e) {
  nvmlProcessDetail_v1_t rec;
  std::memset(&rec, 0, sizeof rec);
  rec.pid = e.pid;
  rec.usedGpuMemory = e.used;
  rec.gpuInstanceId = e.gi;
  rec.computeInstanceId = e.ci;
  rec.usedGpuCcProtectedMemory = 0;
  std::memcpy(static_cast<unsigned char*>(base) + index * stride, &rec, stride);
}

nvmlReturn_t list_processes(const char* symbol, nvmlDevice_t device, unsigned* infoCount,
                            void* infos, ProcType type, std::size_t stride) {
  return on_device(symbol, device, [&](Call& call, const Target& t) {
    if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (stride == 0) return NVML_ERROR_FUNCTION_NOT_FOUND;  // not in this generation
    auto views = call.scan(t.gpu_index);
    if (!views) return NVML_ERROR_UNKNOWN;
    std::vector<ProcEntry> entries = collect(t, type, *views);
    auto n = static_cast<unsigned>(entries.size());
    if (n == 0) {
      *infoCount = 0;
      return NVML_SUCCESS;
    }
    // Too small (including the sizing call with 0/NULL): report the need, write nothing.
    if (*infoCount < n) {
      *infoCount = n;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (infos == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < n; ++i) write_record(infos, i, stride, entries[i]);
    *infoCount = n;
    return NVML_SUCCESS;
  });
}

constexpr std::size_t kV1 = sizeof(nvmlProcessInfo_v1_t);
constexpr std::size_t kV2 = sizeof(nvmlProcessInfo_v2_t);
std::size_t v3_stride() { return kGeneration.v3_stride; }

}  // namespace

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned* c, void* p) {
  return list_processes("nvmlDeviceGetComputeRunningProcesses", d, c, p, ProcType::Compute, kV1);
}
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned* c, void* p) {
  return list_processes("nvmlDeviceGetComputeRunningProcesses_v2", d, c, p, ProcType::Compute, kV2);
}
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned* c, void* p) {
  return list_processes("nvmlDeviceGetComputeRunningProcesses_v3", d, c, p, ProcType::Compute,
                        v3_stride());
}
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned* c, void* p) {
  return list_processes("nvmlDeviceGetGraphicsRunningProcesses", d, c, p, ProcType::Graphics, kV1);
}
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t d, unsigned* c, void* p) {
  return list_processes("nvmlDeviceGetGraphicsRunningProcesses_v2", d, c, p, ProcType::Graphics, kV2);
}
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned* c, void* p) {
  return list_processes("nvmlDeviceGetGraphicsRunningProcesses_v3", d, c, p, ProcType::Graphics,
                        v3_stride());
}
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t d, unsigned* c, void* p) {
  return list_processes("nvmlDeviceGetMPSComputeRunningProcesses", d, c, p, ProcType::Mps, kV1);
}
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t d, unsigned* c, void* p) {
  return list_processes("nvmlDeviceGetMPSComputeRunningProcesses_v2", d, c, p, ProcType::Mps, kV2);
}
GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t d, unsigned* c, void* p) {
  return list_processes("nvmlDeviceGetMPSComputeRunningProcesses_v3", d, c, p, ProcType::Mps,
                        v3_stride());
}

GPUSIM_EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
                                                                nvmlProcessDetailList_v1_t* plist) {
  return on_device("nvmlDeviceGetRunningProcessDetailList", device, [&](Call& call, const Target& t) {
    if (plist == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (plist->version != nvmlProcessDetailList_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    ProcType type;
    switch (plist->mode) {
      case NVML_PROCESS_MODE_COMPUTE: type = ProcType::Compute; break;
      case NVML_PROCESS_MODE_GRAPHICS: type = ProcType::Graphics; break;
      case NVML_PROCESS_MODE_MPS: type = ProcType::Mps; break;
      default: return NVML_ERROR_INVALID_ARGUMENT;
    }
    auto views = call.scan(t.gpu_index);
    if (!views) return NVML_ERROR_UNKNOWN;
    std::vector<ProcEntry> entries = collect(t, type, *views);
    auto n = static_cast<unsigned>(entries.size());
    if (n == 0) {
      plist->numProcArrayEntries = 0;
      return NVML_SUCCESS;
    }
    if (plist->procArray == nullptr || plist->numProcArrayEntries < n) {
      plist->numProcArrayEntries = n;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; ++i) {
      write_record(plist->procArray, i, sizeof(nvmlProcessDetail_v1_t), entries[i]);
    }
    plist->numProcArrayEntries = n;
    return NVML_SUCCESS;
  });
}
