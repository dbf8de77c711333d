// What `gpureap watch` looks at every interval, read incrementally. A process's identity, owner,
// command line, executable and container do not change while its PID and start time stay the
// same, so they are read once, in a full scan (a snapshot, /proc in ps's scope), and kept per
// PID + start time; each look then reads only what can change: the driver (memory, utilisation,
// which PIDs it lists) and one `stat` per process followed (CPU time, state; its file kept
// open and read with one pread, proc/kept_stat_files.hpp), for a holder whose end the
// kernel's events tell only at the looks that read the driver. A full scan is
// taken again every full-scan period, and soon when something may have changed what the
// cache knows: a PID the driver lists for the first time, or a listed process that exited,
// reaped or not (its forked workers may now be orphans, and unreaped it is a zombie). Orphans
// and zombies can also arise while the driver's lists stay the same: a job's leader that
// lists nothing ends (its workers' proof), a worker's listed parent ends and leaves the list
// with its context, a GPU process leaves the list alive (its workers are no longer a running
// job's), a child of a GPU process exits unreaped, and, where the kernel's events can be had
// (snapshot/holder_events.hpp), a process opens a device file or a holder forks. (Without
// them: a child forked after the last full scan, a process that starts holding a device file
// unlisted wait for the next full scan.)
// So each look also reads one `stat` of the processes whose end would make them
// (exit_sentinels.hpp). Every full scan these ask for comes from one token bucket: at once, up
// to kTriggeredScanBurst in a row, then one per kTriggeredScanGap, so that a user who starts and
// ends GPU processes (or children of one) in a loop cannot make every look a full scan; what
// asked for a scan stays asked until one is taken. Processes that vanish mid-look are dropped,
// a GPU that cannot be read freezes what is known of its processes, and a driver that cannot
// be read (or load) leaves only the orphans and zombies to judge.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "accounts/user_names.hpp"
#include "proc/kept_stat_files.hpp"
#include "snapshot/snapshot.hpp"
#include "watch/exit_sentinels.hpp"

namespace gpureap {

enum class CandidateKind {
  GpuProcess,  // the driver lists it, and it is the process here that holds the GPU (identity ok)
  Orphan,      // holds a GPU's device file and its job is provably over (HolderRole::Orphan)
  Zombie,      // an unreaped zombie of a GPU process (or listed, or holding device files)
  // ROCm compute on an AMD GPU (Snapshot::rocm_compute: it holds /dev/kfd, never a KFD
  // context listed under its PID nor a render or card node alone), the root of its job: a ROCm process
  // whose ancestor is one too is that job's forked worker. Found at full scans, where its
  // memory is read too (the DRM clients' fdinfo needs the scan's descriptors).
  RocmProcess,
};

// "gpu-process", "orphan", "zombie", "rocm-process"
std::string_view candidate_kind_name(CandidateKind kind);

// A process as rules see it.
struct Candidate {
  pid_t pid = 0;
  std::uint64_t start_ticks = 0;
  CandidateKind kind = CandidateKind::GpuProcess;
  uid_t uid = 0;        // real uid: whose process it is (as reap decides)
  std::string user;     // its name, or the number when no account has it
  std::string command;  // whole command line, "[comm]" without one (attacker-chosen text)
  std::string exe;      // the executable's path (" (deleted)" dropped), "" when unreadable
  std::optional<ContainerRef> container;
  char state = '?';
  double start_unix = 0;
  double age_seconds = 0;
  std::map<unsigned, std::uint64_t> gpu_memory;  // listed memory per GPU index (an orphan: the context it keeps)
  std::vector<unsigned> gpus;                    // GPU indices it uses (NVIDIA's)
  // AMD and Intel GPUs by PCI address: the device memory of the DRM clients it holds (each
  // once) and its KFD allocations outside them, as the last full scan read them.
  std::map<std::string, std::uint64_t> drm_memory;
  // Highest over its GPUs; nullopt when the driver cannot say (always for a ROCm process:
  // unknown, never idle).
  std::optional<unsigned> sm_util_percent;
  double cpu_seconds = 0;                        // its own CPU time and its GPU workers', so far
  // When cpu_seconds was read: at this look, or at an earlier one for a holder whose CPU the
  // look did not read again (Observer::set_driver_read_seconds).
  std::chrono::steady_clock::time_point cpu_read_at{};
  pid_t parent = 0;                              // zombie: the parent that must reap it
  std::uint64_t parent_start_ticks = 0;
  OrphanEvidence orphan_evidence = OrphanEvidence::None;
  std::vector<pid_t> evidence_pids;

  std::uint64_t memory_bytes() const;
  std::pair<pid_t, std::uint64_t> key() const { return {pid, start_ticks}; }
};

// A process followed from look to look: what was read once, and the CPU time it and its
// GPU workers had when last read.
struct FollowedProcess {
  Candidate facts;
  std::vector<std::pair<pid_t, std::uint64_t>> workers;  // (PID, start time) of its forked GPU workers
  std::map<pid_t, std::uint64_t> cpu_ticks;               // utime + stime, its own and each worker's
  // It and each worker are event-kept holders (HolderEventsState::holders): the end of any of
  // them is heard, so its stat need not be read to learn it.
  bool end_heard = false;
  std::chrono::steady_clock::time_point cpu_read_at{};  // when cpu_ticks were read
  pid_t context_of = 0;                                   // orphan: the exited listed PID whose context it keeps
};

// Every candidate a snapshot shows: GPU processes whose identity is ok (with their workers),
// orphans, zombies of GPU processes. Loads the details it needs into the snapshot's table. PIDs
// the driver lists that are not candidates (foreign, mismatch, unverified) go to *not_judged.
std::vector<FollowedProcess> follow_snapshot(Snapshot& snapshot, UserNames& names,
                                             std::unordered_set<pid_t>* not_judged = nullptr);

// The driver's part of a snapshot, as a reading.
DriverReading reading_of(const Snapshot& snapshot);

// The followed process as the driver reads now (memory, GPUs, utilisation; `reading` null when
// the driver cannot be read); nullopt when it cannot be judged: a GPU process without the
// driver, or anything on a GPU in `unreadable_gpus`.
std::optional<Candidate> judge(FollowedProcess& followed, const DriverReading* reading,
                               const std::set<unsigned>& unreadable_gpus);

struct Look {
  std::chrono::steady_clock::time_point at;
  bool full_scan = false;
  bool driver_readable = false;
  std::string driver_problem;  // one line for the log when not readable
  std::map<unsigned, std::string> gpu_uuids;  // index -> UUID (lower case), every GPU counted
  std::set<unsigned> unreadable_gpus;         // lost, failing, or whose process list is incomplete
  std::vector<Candidate> candidates;
  // Followed processes this look could not judge (their GPU or the driver could not be read):
  // what rules know of them stays as it was.
  std::set<std::pair<pid_t, std::uint64_t>> frozen;
  // A full scan's snapshot (its details loaded for the candidates); null after a quick look.
  // Kept only for whoever reads looks after the rules (watch --listen publishes metrics of it,
  // and doctor's checks load the details of zombies' parents into it).
  std::shared_ptr<Snapshot> snapshot;
};

// The full scans a look asks for (a GPU process listed for the first time, one that exited or
// left the list, an ended sentinel): a token bucket of kTriggeredScanBurst, one token back every
// kTriggeredScanGap. The periodic full scan does not take from it.
inline constexpr std::chrono::seconds kTriggeredScanGap{2};
inline constexpr double kTriggeredScanBurst = 3;

class Observer {
 public:
  Observer(SnapshotOptions options, double full_scan_seconds);

  // One look; a full scan when `full` or when one is due (see the top of this file).
  Look look(bool full);
  void set_full_scan_seconds(double seconds) { full_scan_seconds_ = seconds; }
  // While the kernel's events bring new holders and exits, quick looks read the driver only
  // once this long has passed since its last reading (policy.hpp's driver_read_seconds; 0:
  // every look, infinity: at full scans only) and judge by that reading in between. Without
  // the events every look reads it (it is then what tells of new GPU processes). The CPU time
  // of a followed process whose end the events tell is read at the same looks: the rules'
  // idle windows then span the driver's (its utilisation samples cover the same time).
  void set_driver_read_seconds(double seconds) { driver_read_seconds_ = seconds; }
  // Whether the quick looks now read the driver every look (no events, or a policy that needs it).
  bool driver_every_look() const { return !events_active_ || driver_read_seconds_ <= 0; }
  // The driver and /proc as the looks read them, for the snapshot an action is taken on.
  SnapshotSource& source();
  std::size_t full_scans() const { return full_scans_; }
  std::size_t quick_looks() const { return quick_looks_; }
  // CPU time (this thread's, kernel included) the quick looks spent reading the driver: what
  // the looks cost that is the driver library's, not gpureap's.
  double driver_cpu_seconds() const { return driver_cpu_seconds_; }

  // Followed processes and exit sentinels, for the benchmark's and tests' curiosity.
  std::size_t followed() const { return followed_.size(); }
  std::size_t sentinels() const { return sentinels_.size(); }

 private:
  Look full_look();
  std::optional<Look> quick_look();
  bool refresh_cpu(FollowedProcess& followed, std::chrono::steady_clock::time_point now);
  bool sentinel_ended();
  bool take_rescan_token();
  Look finish(Look look, const DriverReading* reading);

  SnapshotOptions options_;
  std::unique_ptr<SnapshotSource> source_;
  std::optional<DriverReading> last_reading_;  // sizes the next reading's buffers
  std::chrono::steady_clock::time_point last_reading_at_{};
  double driver_read_seconds_ = 0;
  bool events_active_ = false;  // the last full scan's holders came from the kernel's events
  double full_scan_seconds_;
  std::chrono::steady_clock::time_point last_full_{};
  bool have_full_ = false;
  std::size_t full_scans_ = 0;
  std::size_t quick_looks_ = 0;
  double driver_cpu_seconds_ = 0;
  UserNames user_names_;
  std::unordered_map<pid_t, FollowedProcess> followed_;
  // Listed PIDs that are not ours to judge until the next full scan: not in this PID
  // namespace (foreign), not the process holding the GPU (mismatch), unverifiable.
  std::unordered_set<pid_t> not_judged_;
  std::vector<ExitSentinel> sentinels_;  // from the last full scan
  procfs::KeptStatFiles stats_;  // the followed processes' and sentinels' stat, kept open
  bool rescan_wanted_ = false;  // a sentinel ended, a GPU process exited, turned zombie or left the list
  double rescan_tokens_ = kTriggeredScanBurst;
  std::chrono::steady_clock::time_point tokens_at_{};
};

}  // namespace gpureap
