// One simulated CUDA context allocation, as gpusim-cuda publishes it in allocs/<id>.json.
// Records are immutable once published; liveness lives in the lock files beside them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.hpp"

namespace gpusim {

enum class ProcType { Compute, Graphics, Mps };

// "C", "G", "M" (the letters --alloc takes).
const char* proc_type_letter(ProcType t);
std::optional<ProcType> proc_type_from_letter(const std::string& s);

struct AllocRecord {
  std::string id;
  unsigned gpu = 0;                   // index in config.gpus
  std::optional<unsigned> gi;         // MIG GPU instance; nullopt = whole GPU (MIG off)
  unsigned ci = 0;                    // MIG compute instance
  ProcType type = ProcType::Compute;
  std::uint64_t bytes = 0;
  unsigned owner_pid = 0;             // host pid: what the driver reports
  unsigned owner_nspid = 0;           // pid in the owner's own namespace (diagnostics only)
  std::string owner_name;
  std::optional<std::uint64_t> release_delay_ms;  // nullopt = the GPU's release_delay_ms
  bool leak = false;                  // memory survives every holder (needs free/reset)
  std::int64_t created_ns = 0;        // CLOCK_REALTIME
  unsigned sm_util = 0;               // per-process utilization samples, percent
  unsigned mem_util = 0;
  unsigned mps_server_pid = 0;        // an MPS client context: the server it runs in (0: none)
};

Result<AllocRecord> parse_alloc_record(const std::string& json_text);
std::string serialize_alloc_record(const AllocRecord& rec);

}  // namespace gpusim
