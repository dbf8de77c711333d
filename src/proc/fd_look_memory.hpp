// What successive scans in the Holders scope remember of the processes whose fd/ held no GPU
// device file, so that a view refreshed every second (top) does not list every descriptor of
// every process each time: such a process is looked at again every `full_look_every` scans
// (its first look again staggered by PID, so that each scan takes an even share); a PID not in
// the last scan is always looked at, and the driver's PIDs are always read in full (snapshot).
// What it can miss, for at most that many scans: a process that already ran, opens a GPU
// device file and is not listed by the driver (a monitor that starts using NVML, a process
// that opens the device without creating a context); a forked worker is a new PID, seen at once.
// A PID reused within one scan's interval would be taken for the process it replaced: that
// needs pid_max forks in an interval.
//
// It also keeps what a holder's details were (user ids, command line, executable, container,
// mapped libraries), reused while the holder is the same process (PID and start time) for
// `details_every` scans: a holder's stat is read at every scan, the rest, which a process
// seldom changes, that often. A caller that hears of changes (the holder events: an exec, new
// credentials, an open) forgets that holder's details at once.
//
// With them it keeps the GPU descriptors the holder's last full fd/ listing found. A scan that
// is told so (quick_proofs, the event-kept scans) checks only those descriptors, each one's
// link and device node, instead of listing fd/ and reading every link: a close, or another file
// at the same number, fails the check and fd/ is listed in full. What such a scan cannot see is
// a GPU descriptor the holder gained without an open event (SCM_RIGHTS, pidfd_getfd) while it
// held another: it shows at the next full listing (the details' cadence, a walk, or an event
// on the holder: forget_files).
//
// And it keeps each holder's /proc/<pid> directory, its stat and (while it has one thread) its
// children file open from its full look (KeptHolderFiles, at most kMaxKeptHolderFiles holders):
// a scan between full looks reads through them with no path lookup, no open and no close. They
// stay bound to the process they were opened for: once it is reaped their reads fail, and the
// holder is read afresh by its PID (its start time is compared at every read as well).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "proc/proc_io.hpp"
#include "proc/process_info.hpp"

namespace gpureap {

struct KeptHolderFiles {
  procfs::unique_fd dir;       // /proc/<pid>
  procfs::unique_fd stat;      // its stat
  procfs::unique_fd children;  // task/<pid>/children; none when it had several threads
};
// Three descriptors each: well inside the soft limit of 1,024 descriptors.
inline constexpr std::size_t kMaxKeptHolderFiles = 128;

class FdLookMemory {
 public:
  explicit FdLookMemory(unsigned full_look_every = 10, unsigned details_every = 5)
      : full_look_every_(full_look_every > 0 ? full_look_every : 1), details_every_(details_every > 0 ? details_every : 1) {}

  std::size_t remembered() const { return quiet_.size(); }

  // A holder's details as read at its last full look (everything read_detail_files reads but
  // wchan, which follows the state).
  struct Details {
    std::uint64_t start_time_ticks = 0;
    unsigned due_round = 0;
    uid_t uid = 0, real_uid = 0, saved_uid = 0;
    std::vector<pid_t> ns_pids;
    std::vector<std::string> cmdline;
    std::string exe;
    std::optional<ContainerRef> container;
    std::optional<bool> maps_nvml_only;
    // The GPU descriptors (NVIDIA's, then DRM's) of its last full fd/ listing; none: list fd/.
    std::optional<std::vector<DeviceFileHandle>> gpu_files;
    // Shared by the copies each scan makes of what it kept; null: read by path.
    std::shared_ptr<const KeptHolderFiles> files;
  };
  // The details of this process (PID and start time) to reuse now, or null.
  const Details* details_for(pid_t pid, std::uint64_t start_time_ticks) const;
  unsigned round() const { return round_; }
  unsigned details_every() const { return details_every_; }
  // Its details are read again at the next scan.
  void forget_details(pid_t pid) { details_.erase(pid); }
  // The kept details of `pid` whose GPU descriptors a scan may check one by one (the start
  // time is the caller's to compare), or null: its fd/ is listed.
  const Details* files_known(pid_t pid) const;
  // The files kept for this process (PID and start time), whatever its details' cadence; null.
  std::shared_ptr<const KeptHolderFiles> files_of(pid_t pid, std::uint64_t start_time_ticks) const;
  // The files kept for `pid` whatever its start time, with the start time they were kept for.
  std::pair<std::shared_ptr<const KeptHolderFiles>, std::uint64_t> files_of(pid_t pid) const;
  // How many holders have files kept now (a scan keeps new ones up to kMaxKeptHolderFiles).
  std::size_t files_kept() const;
  // Its fd/ is listed in full at the next scan.
  void forget_files(pid_t pid) {
    if (const auto it = details_.find(pid); it != details_.end()) it->second.gpu_files.reset();
  }

 private:
  friend class ProcessTableBuilder;
  struct Quiet {
    unsigned due_round = 0;  // the scan that looks at it in full again
  };
  std::unordered_map<pid_t, Quiet> quiet_;
  std::unordered_map<pid_t, Details> details_;
  unsigned round_ = 0;
  unsigned full_look_every_;
  unsigned details_every_;
};

inline const FdLookMemory::Details* FdLookMemory::details_for(pid_t pid, std::uint64_t start_time_ticks) const {
  const auto it = details_.find(pid);
  if (it == details_.end() || it->second.start_time_ticks != start_time_ticks || round_ >= it->second.due_round) {
    return nullptr;
  }
  return &it->second;
}

inline const FdLookMemory::Details* FdLookMemory::files_known(pid_t pid) const {
  const auto it = details_.find(pid);
  if (it == details_.end() || !it->second.gpu_files || it->second.gpu_files->empty() || round_ >= it->second.due_round) {
    return nullptr;
  }
  return &it->second;
}

inline std::shared_ptr<const KeptHolderFiles> FdLookMemory::files_of(pid_t pid, std::uint64_t start_time_ticks) const {
  const auto it = details_.find(pid);
  if (it == details_.end() || it->second.start_time_ticks != start_time_ticks) return nullptr;
  return it->second.files;
}

inline std::pair<std::shared_ptr<const KeptHolderFiles>, std::uint64_t> FdLookMemory::files_of(pid_t pid) const {
  const auto it = details_.find(pid);
  if (it == details_.end()) return {nullptr, 0};
  return {it->second.files, it->second.start_time_ticks};
}

inline std::size_t FdLookMemory::files_kept() const {
  std::size_t kept = 0;
  for (const auto& [pid, details] : details_) kept += details.files != nullptr ? 1 : 0;
  return kept;
}

}  // namespace gpureap
