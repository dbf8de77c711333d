// Observes every published allocation and applies the driver's release rules.
//
//   owner alive                      -> Active:    memory used, process listed
//   owner dead, inheritors hold it   -> Orphaned:  memory used, listed under the DEAD owner's PID
//   nobody holds it, --leak          -> Leaked:    memory used forever, no process
//   nobody holds it, within delay    -> Releasing: memory used until stamp + delay
//   nobody holds it, delay over      -> Released:  files deleted, memory free
//
// The delay counts from the first observation without holders (the release stamp), which is
// when an observer can first know; see docs/simulator.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/alloc_record.hpp"
#include "common/config.hpp"
#include "common/layout.hpp"
#include "common/result.hpp"
#include "common/watched_listing.hpp"

namespace gpusim {

enum class AllocState { Active, Orphaned, Leaked, Releasing, Released };
const char* alloc_state_name(AllocState s);

struct AllocView {
  AllocRecord rec;
  AllocState state = AllocState::Active;
  bool held = false;
  bool owner_alive = false;
  std::optional<std::int64_t> released_at_ns;  // the stamp, once no holder is left
  std::optional<std::int64_t> release_due_ns;  // when the memory goes back to the pool

  bool counts_memory() const { return state != AllocState::Released; }
  // A real driver keeps listing a context under the PID that created it for as long as the
  // context lives: measured on an H200 (driver 580.159.04), a SIGKILLed owner whose forked
  // worker still held the descriptors stayed listed with its 3.6 GiB until the worker ended.
  bool listed() const { return state == AllocState::Active || state == AllocState::Orphaned; }
  bool owner_running() const { return state == AllocState::Active; }
};

// Parsed records of earlier scans, by file name. A record is published once (written to a
// temporary file and renamed into place) and never rewritten, so a name still listed with the
// same inode still holds the same record: a long-lived reader (the driver library, which
// scans on every NVML call) reads and parses each record once. Liveness is never cached: the
// owner file is kept open while its record is listed, and its lock asked at every scan.
struct CachedRecord {
  unsigned long long ino = 0;
  AllocRecord rec;
  OwnedFd owner;  // open from the record's first probe
};
struct RecordCache {
  std::map<std::string, CachedRecord> records;
  WatchedListing listing{kClientWatchAfter};  // allocs/, listed again only after a name in it changed
  std::size_t owners_open = 0;
  void clear() {
    records.clear();
    listing.close();
    owners_open = 0;
  }
};

// Reads allocs/, probes every context and deletes those whose release is complete. Records
// that vanish or are unreadable mid-scan are skipped. Sorted by creation time. With `cache`,
// records are taken from it where their file is unchanged, and it is left holding exactly
// the records listed (allocs/ is listed again only after a name in it changed). With
// `only_gpu`, only that GPU's contexts are probed and returned: a per-device NVML call answers from its own GPU, and probing every context on
// the host for each call was most of what the library cost a client (7 calls per GPU in a
// `gpureap ps`). Liveness stays exact: each call still probes the contexts it reports on.
Result<std::vector<AllocView>> scan_allocations(const Layout& layout, const Config& config,
                                                std::int64_t now_ns, RecordCache* cache = nullptr,
                                                std::optional<unsigned> only_gpu = std::nullopt);

// Bytes held by live (not yet released) allocations on a GPU, or on one of its MIG instances.
std::uint64_t allocated_bytes(const std::vector<AllocView>& views, unsigned gpu);
std::uint64_t allocated_bytes_on_instance(const std::vector<AllocView>& views, unsigned gpu,
                                          unsigned gi);

// Deletes an allocation's files (json first, so it disappears from scans atomically).
void delete_allocation_files(const Layout& layout, const std::string& id);

}  // namespace gpusim
