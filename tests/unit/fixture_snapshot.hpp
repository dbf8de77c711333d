// A snapshot of the fixture /proc tree (tests/fixtures/proc/tree1) joined with a hand-made
// driver reading, for the tests of what is built on a snapshot (kill's selection, metrics):
// GPU 0 (minor 0): python3 200 with 4 GiB, and PID 100 (bash, holds nothing: a mismatch).
// GPU 1 (minor 1): 401 in a docker container with 2 GiB, and 999, which this /proc lacks
// (foreign).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "snapshot/snapshot.hpp"

namespace gpureap::fixture {

inline constexpr std::uint64_t GiB = 1ull << 30;

inline DriverProcess listed(unsigned pid, std::uint64_t bytes) {
  DriverProcess p;
  p.pid = pid;
  p.types.compute = true;
  p.used_memory = bytes;
  return p;
}

inline std::unique_ptr<Snapshot> fixture_snapshot() {
  auto snapshot = std::make_unique<Snapshot>();
  ProcScanOptions options;
  options.proc_root = std::string(GPUREAP_FIXTURE_DIR) + "/proc/tree1";
  snapshot->table = ProcessTable::scan(options);
  DriverReading reading;
  for (unsigned i = 0; i < 2; ++i) {
    GpuReading gpu;
    gpu.index = i;
    gpu.minor_number = i;
    gpu.memory.total = 80 * GiB;
    gpu.memory.used = i == 0 ? 5 * GiB : 3 * GiB;
    gpu.memory.source = "v2";
    reading.gpus.push_back(gpu);
  }
  reading.gpus[0].processes = {listed(200, 4 * GiB), listed(100, 1 * GiB)};
  reading.gpus[1].processes = {listed(401, 2 * GiB), listed(999, 1 * GiB)};
  snapshot->driver.loaded = true;
  join_snapshot(*snapshot, reading);
  return snapshot;
}

}  // namespace gpureap::fixture
