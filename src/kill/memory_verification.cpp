#include "kill/memory_verification.hpp"

#include <poll.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "text/human_format.hpp"
#include "text/signal_names.hpp"

namespace gpureap {
namespace {

using Clock = std::chrono::steady_clock;

bool contains(const std::vector<pid_t>& pids, pid_t pid) {
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

const GpuReading* reading_for(const DriverReading& reading, unsigned index) {
  for (const auto& gpu : reading.gpus) {
    if (gpu.index == index) return &gpu;
  }
  return nullptr;
}

}  // namespace

std::optional<std::uint64_t> released_bytes(const PlannedGpu& planned, const GpuReading& now) {
  if (now.error) return std::nullopt;
  std::uint64_t others_now = 0;
  for (const auto& p : now.processes) {
    if (contains(planned.target_pids, static_cast<pid_t>(p.pid))) return std::nullopt;  // still listed
    if (p.used_memory) others_now += *p.used_memory;
  }
  if (!planned.baseline_used || !now.memory.used) return planned.expected_free_bytes == 0 ? std::optional<std::uint64_t>(0)
                                                                                          : std::nullopt;
  const std::uint64_t baseline = *planned.baseline_used;
  const std::uint64_t used = *now.memory.used;
  const std::uint64_t growth = others_now > planned.others_listed_bytes ? others_now - planned.others_listed_bytes : 0;
  const std::uint64_t expected = std::min(planned.expected_free_bytes, baseline);
  if (used > baseline - expected + growth) return std::nullopt;
  // Freed by the targets: the drop, plus what others grew meanwhile.
  const std::uint64_t dropped = baseline > used ? baseline - used : 0;
  return dropped + growth;
}

std::vector<pid_t> remaining_holders(const KillPlan& plan, const Snapshot& snapshot, unsigned index) {
  std::vector<pid_t> targets;
  for (const auto& t : plan.targets) targets.push_back(t.pid);
  std::vector<pid_t> holders;
  for (const auto& h : snapshot.holders) {
    if (!h.holds_gpu(index)) continue;
    const bool target = contains(targets, h.pid);
    const bool unlisted = h.role == HolderRole::Orphan || h.role == HolderRole::Unlisted;
    const bool worker_of_target = h.role == HolderRole::Worker && h.listed_ancestor && contains(targets, *h.listed_ancestor);
    // A worker whose listed ancestor we killed is re-classified after the kill: its ancestor is
    // gone and no longer listed, so it shows as orphan/unlisted, which is covered above.
    if (target || unlisted || worker_of_target) holders.push_back(h.pid);
  }
  std::sort(holders.begin(), holders.end());
  return holders;
}

int pause_between_readings(const VerifyOptions& options) {
  const Interruption& interruption = options.interruption;
  if (interruption.received) {
    if (const int signal = interruption.received(); signal != 0) return signal;
  }
  pollfd wake{interruption.fd, POLLIN, 0};
  ::poll(&wake, interruption.fd >= 0 ? 1 : 0, static_cast<int>(options.interval.count()));
  return interruption.received ? interruption.received() : 0;
}

std::string interrupted_verification_text(const std::string& gpu, int signal) {
  return fmt::format("{}: not verified: gpureap was interrupted by {} while it waited for the release", gpu,
                     signal_name(signal));
}

namespace {

// The last driver reading of the wait, and how the wait ended.
struct ReleaseWait {
  std::optional<DriverReading> last;
  std::size_t pending = 0;
  int interrupted_by = 0;
};

// Reads the driver until every GPU's release is verified, the deadline passes, the driver
// cannot be read, or a signal interrupts the pause between readings.
ReleaseWait wait_for_release(const KillPlan& plan, const DriverPoll& poll_driver, const VerifyOptions& options,
                             std::vector<GpuVerification>& results) {
  const auto start = Clock::now();
  const auto deadline = start + options.timeout;
  ReleaseWait wait;
  wait.pending = results.size();
  while (true) {
    wait.last = poll_driver();
    if (!wait.last) break;
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (results[i].verified) continue;
      const GpuReading* now = reading_for(*wait.last, plan.gpus[i].index);
      if (now == nullptr) continue;
      if (const auto freed = released_bytes(plan.gpus[i], *now)) {
        results[i].verified = true;
        results[i].freed_bytes = *freed;
        results[i].verify_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        --wait.pending;
      }
    }
    if (wait.pending == 0 || Clock::now() >= deadline) break;
    if ((wait.interrupted_by = pause_between_readings(options)) != 0) break;
  }
  return wait;
}

// Who still holds the GPU: the holders the snapshot shows, and targets the driver still lists
// that are alive.
std::vector<pid_t> still_held_by(const KillPlan& plan, const PlannedGpu& planned, const GpuReading& now,
                                 const Snapshot* snapshot) {
  std::vector<pid_t> listed_targets;
  for (const auto& p : now.processes) {
    if (contains(planned.target_pids, static_cast<pid_t>(p.pid))) listed_targets.push_back(static_cast<pid_t>(p.pid));
  }
  std::vector<pid_t> held_by;
  if (snapshot) held_by = remaining_holders(plan, *snapshot, planned.index);
  for (pid_t pid : listed_targets) {
    // An exited target stays listed while processes it forked keep its context: they are
    // the holders (above), not the PID that no longer exists.
    const ProcessInfo* alive = snapshot ? snapshot->table.find(pid) : nullptr;
    if (snapshot && (alive == nullptr || alive->state == 'Z')) continue;
    if (!contains(held_by, pid)) held_by.push_back(pid);
  }
  return held_by;
}

// The holders named with their comm, what ends them, and which were left running on purpose.
std::string still_held_text(const GpuVerification& v, const PlannedGpu& planned, const std::string& bytes,
                            double waited, const Snapshot* snapshot, const VerifyOptions& options) {
  std::string pids;
  for (pid_t pid : v.still_held_by) {
    std::string what;
    if (snapshot) {
      if (const ProcessInfo* p = snapshot->table.find(pid)) what = " (" + p->comm + ")";
    }
    pids += fmt::format("{}{}{}", pids.empty() ? "" : ", ", pid, what);
  }
  std::string all, kept;
  std::size_t to_end = 0;
  for (pid_t pid : v.still_held_by) {
    std::string& list = options.left_on_purpose.count(pid) ? kept : all;
    list += fmt::format("{}{}", list.empty() ? "" : " ", pid);
    to_end += options.left_on_purpose.count(pid) ? 0 : 1;
  }
  const std::string advice =
      all.empty() ? std::string()
                  : fmt::format("holding the GPU's device file: `gpureap kill {}` ends {}", all, to_end == 1 ? "it" : "them");
  const std::string on_purpose = kept.empty() ? std::string() : fmt::format("PID {} left running on purpose (above)", kept);
  return fmt::format("GPU {}: {} not freed after {:.1f} s: still held by PID {} ({}{}{})", planned.index, bytes, waited,
                     pids, advice, advice.empty() || on_purpose.empty() ? "" : "; ", on_purpose);
}

// Not released in time: say by whom it is still held, or that nobody holds it.
void explain_unreleased(GpuVerification& v, const KillPlan& plan, const PlannedGpu& planned,
                        const std::optional<DriverReading>& last, const Snapshot* snapshot,
                        const VerifyOptions& options) {
  if (!last) {
    v.message = "the driver could not be read: the release cannot be verified";
    return;
  }
  const GpuReading* now = reading_for(*last, planned.index);
  if (now == nullptr || now->error) {
    v.message = fmt::format("GPU {} could not be read: the release cannot be verified", planned.index);
    return;
  }
  if (planned.baseline_used && now->memory.used) {
    const auto baseline = *planned.baseline_used;
    const auto used = *now->memory.used;
    v.freed_bytes = baseline > used ? baseline - used : 0;
    v.held_bytes = planned.expected_free_bytes > *v.freed_bytes ? planned.expected_free_bytes - *v.freed_bytes : 0;
  }
  v.still_held_by = still_held_by(plan, planned, *now, snapshot);
  const std::string bytes = v.held_bytes ? format_bytes(*v.held_bytes) : std::string("memory");
  const double waited = std::chrono::duration<double>(options.timeout).count();
  if (!v.still_held_by.empty()) {
    v.message = still_held_text(v, planned, bytes, waited, snapshot, options);
  } else {
    v.message = fmt::format(
        "GPU {}: the driver still reports {} in use with no holder after {:.1f} s (leaked, or a release "
        "still in progress): run `gpureap doctor`",
        planned.index, bytes, waited);
  }
}

}  // namespace

std::vector<GpuVerification> verify_release(const KillPlan& plan, const DriverPoll& poll_driver,
                                            const SnapshotPoll& take_snapshot, const VerifyOptions& options) {
  std::vector<GpuVerification> results;
  for (const auto& gpu : plan.gpus) {
    GpuVerification v;
    v.index = gpu.index;
    v.expected_free_bytes = gpu.expected_free_bytes;
    results.push_back(v);
  }
  if (results.empty()) return results;
  const ReleaseWait wait = wait_for_release(plan, poll_driver, options, results);
  if (wait.pending == 0) return results;
  if (wait.interrupted_by != 0) {
    for (auto& v : results) {
      if (!v.verified) v.message = interrupted_verification_text(fmt::format("GPU {}", v.index), wait.interrupted_by);
    }
    return results;
  }
  std::unique_ptr<Snapshot> snapshot = take_snapshot ? take_snapshot() : nullptr;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!results[i].verified) explain_unreleased(results[i], plan, plan.gpus[i], wait.last, snapshot.get(), options);
  }
  return results;
}

}  // namespace gpureap
