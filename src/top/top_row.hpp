// The rows of `gpureap top`: one per (GPU, process) from the shared snapshot, each with what
// the driver and Linux say about it and its role towards the GPU. Every string in a row has
// been through the terminal sanitiser: the layout and the screen only cut and pad them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "kill/kill_plan.hpp"
#include "snapshot/snapshot.hpp"
#include "top/cpu_sampler.hpp"
#include "top/drm_engine_sampler.hpp"

namespace gpureap {

enum class RowKind {
  GpuProcess,  // the driver lists it and it is the process here (identity ok or unverified)
  Foreign,     // the driver lists a PID that does not exist in this PID namespace
  Mismatch,    // the driver lists a PID that here names another process: never the GPU process
  Gone,        // the driver lists an exited PID whose context its forked holders keep alive
  Worker,      // holds the GPU's device file; an ancestor is listed: part of a running job
  Orphan,      // holds the GPU's device file; its job is provably over
  Client,      // an NVML client (a monitor): holds device files, no memory
  Unlisted,    // holds the GPU's device file for a reason gpureap cannot prove
  DrmClient,   // AMD, Intel: a DRM client of the GPU (one row a client, however many processes share it)
  Kfd,         // AMD: a ROCm process with VRAM on the GPU and no DRM client of it
};

// Tags follow a process, not a number: a PID reused by another process is not the one tagged.
struct ProcessKey {
  pid_t pid = 0;
  std::uint64_t start_time_ticks = 0;  // 0 when the process is not visible here
  auto operator<=>(const ProcessKey&) const = default;
};

struct TopRow {
  RowKind kind = RowKind::GpuProcess;
  std::optional<unsigned> gpu;      // unknown for holders when the driver cannot be read
  std::optional<std::size_t> drm_gpu;  // DRM rows: the GPU's place in Snapshot::drm.devices ("D0")
  ProcessKey key;
  std::optional<pid_t> local_pid;   // its PID inside its own PID namespace, when that differs
  std::string user;                 // sanitised, "" when unknown
  std::string container;            // sanitised, e.g. "docker:4f2a9c1b7d3e", "" when none
  std::string type;                 // "C", "G", "C+G", "M" for listed processes; "" for holders
  std::optional<std::uint64_t> gpu_memory;
  std::optional<unsigned> sm_percent;  // DRM clients: the busiest engine's share since the last refresh
  std::optional<double> cpu_percent;
  std::optional<std::uint64_t> host_memory;  // resident set
  char state = '?';
  std::optional<double> age_seconds;
  std::string command;              // sanitised
  std::string role;                 // "worker of 1234", "orphan of PID 1234 (gone)", ... "" for a plain GPU process
  std::optional<pid_t> parent;      // the row it nests under in the tree: listed ancestor, dead owner
  bool can_act = true;              // this user may signal it
  std::string cannot_act;           // why not, when !can_act

  pid_t pid() const { return key.pid; }
};

// What the rows need to know about who is looking.
struct RowContext {
  const PlanPolicy* policy = nullptr;  // permission and protection; none: every row actionable
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
};

// Rows for every driver-listed process (per GPU) and every device-file holder the driver does
// not list (per GPU it holds); then the AMD and Intel GPUs' DRM clients (each client once, under
// the first process holding it) and the KFD processes with no client of the GPU. `cpu` (and
// `engines`, when given) are updated with what was seen.
std::vector<TopRow> build_rows(const Snapshot& snapshot, CpuSampler& cpu, const RowContext& context,
                               DrmEngineSampler* engines = nullptr);

}  // namespace gpureap
