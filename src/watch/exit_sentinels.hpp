// The processes whose end turns a device-file holder into an orphan, or leaves a zombie of a
// GPU process, without anything the driver lists changing: the quick looks read one `stat` of
// each, and a full scan follows when one has ended (observation.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "snapshot/snapshot.hpp"

namespace gpureap {

// (PID, start time): a PID reused by another process is not the one watched.
using ExitSentinel = std::pair<pid_t, std::uint64_t>;

// At most this many are watched (a stat each per look); beyond it the periodic full scan
// finds the rest. Leaders come first: their end is an orphan's proof.
inline constexpr std::size_t kMaxExitSentinels = 256;

// From a full scan's snapshot, the living (not zombie) processes that matter:
// - the process-group and session leaders of holders that are a running job's workers or
//   unlisted: once such a leader is gone, the snapshot's proof (GroupLeaderGone,
//   SessionLeaderGone) makes them orphans; and a worker's listed ancestor, whose end (even
//   when the driver stops listing it) leaves the worker no running job's;
// - the children of driver-listed processes and of holders: unreaped after they exit, they
//   are zombies of a GPU process (the zombie rule's and doctor's definition).
std::vector<ExitSentinel> exit_sentinels(const Snapshot& snapshot, std::size_t limit = kMaxExitSentinels);

}  // namespace gpureap
