#include "kill/drm_verification.hpp"

#include <poll.h>

#include <algorithm>

#include <fmt/format.h>

#include "drm/client_ledger.hpp"
#include "drm/fdinfo_record.hpp"
#include "text/human_format.hpp"

namespace gpureap {
namespace {

using Clock = std::chrono::steady_clock;

bool release_has(const std::vector<pid_t>& pids, pid_t pid) { return std::find(pids.begin(), pids.end(), pid) != pids.end(); }

// Is `planned` still held in `now`? A drm-client-id is never given to another client, so any
// holder of it means it is still open. A pasid (amdgpu before 5.19) is freed with its client and
// may be handed to a new one: there it counts only while one of the original holders shows it.
const drm::DrmClient* still_open(const PlannedDrmClient& planned, const std::string& pci, const drm::DrmReading& now) {
  for (const drm::DrmClient* client : now.clients.clients_of(pci)) {
    const auto identity = drm::client_identity(client->stats);
    if (!identity || *identity != planned.identity) continue;
    if (!planned.by_pasid) return client;
    for (pid_t pid : client->pids()) {
      if (release_has(planned.holders, pid)) return client;
    }
  }
  return nullptr;
}

void add_unique(std::vector<pid_t>& pids, pid_t pid) {
  if (!release_has(pids, pid)) pids.push_back(pid);
}

std::string pid_list(const std::vector<pid_t>& pids, const char* separator) {
  std::string text;
  for (pid_t pid : pids) text += fmt::format("{}{}", text.empty() ? "" : separator, pid);
  return text;
}

}  // namespace

DrmReleaseState drm_release_state(const PlannedDrmGpu& planned, const drm::DrmReading& now) {
  DrmReleaseState state;
  const drm::DrmDevice* device = now.device_at(planned.pci_address);
  if (device == nullptr) {
    state.device_missing = true;
    return state;
  }
  // A client a process outside the plan also holds was never expected to go; while it stays,
  // what the targets held is not back either, and its holders are named.
  for (const auto* clients : {&planned.ending, &planned.kept}) {
    for (const auto& client : *clients) {
      if (const drm::DrmClient* open = still_open(client, planned.pci_address, now)) {
        for (pid_t pid : open->pids()) add_unique(state.still_held_by, pid);
      }
    }
  }
  for (const auto& process : now.kfd_processes) {
    if (release_has(planned.kfd_pids, process.pid)) add_unique(state.kfd_left, process.pid);
  }
  std::sort(state.still_held_by.begin(), state.still_held_by.end());
  std::sort(state.kfd_left.begin(), state.kfd_left.end());
  if (!state.still_held_by.empty() || !state.kfd_left.empty()) return state;
  if (!planned.baseline_used || !device->vram_used) {
    // i915 and xe give no device figure: the clients being gone from every descriptor table is
    // all the driver tells, and a client can outlive them unseen (a descriptor in flight in a
    // unix socket, a mapping of the file). That is not a release proven.
    state.no_figure = true;
    return state;
  }
  // What the figure holds beyond the clients now: the driver's own use, frees in flight and
  // leaks, and any of the targets' memory not yet freed. Released when that is no more than it
  // was before (plus the ending clients' shared memory, which stays with its importers and was
  // counted twice then). Others' memory counts both ways, so another client's end is never
  // taken for the targets'. When the baseline itself held more than the driver's own allowance
  // unexplained, a drop of that cannot be told from the targets': then the figure must come
  // back to the allowance.
  const std::uint64_t used = *device->vram_used;
  const std::uint64_t explained = drm::explained_vram(now, planned.pci_address).total();
  const std::uint64_t unexplained = used > explained ? used - explained : 0;
  // The ending clients' shared memory is allowed for only as far as clients still open show
  // shared memory now: an importer that keeps it reports it as shared; a client of the targets
  // kept open unseen (in flight in a socket) shows nothing, and is not excused by it.
  std::uint64_t shared_open = 0;
  for (const drm::DrmClient* client : now.clients.clients_of(planned.pci_address)) {
    shared_open += drm::shared_device_bytes(client->stats).value_or(0);
  }
  const bool unsettled_base = planned.unexplained_base > planned.driver_allowance;
  const std::uint64_t limit = (unsettled_base ? planned.driver_allowance : planned.unexplained_base) +
                              std::min(planned.shared_ending, shared_open);
  state.unexplained_now = unexplained;
  if (unexplained > limit) {
    state.unattributable = unsettled_base;
    return state;
  }
  state.released = true;
  const std::uint64_t others_now = now.clients.device_memory_of(planned.pci_address).value_or(0);
  const std::uint64_t baseline = *planned.baseline_used;
  // The targets' share of the drop: the figure's fall corrected by others' change either way.
  const long double freed = static_cast<long double>(baseline) - static_cast<long double>(used) +
                            static_cast<long double>(others_now) - static_cast<long double>(planned.others_bytes);
  state.freed_bytes = freed > 0 ? static_cast<std::uint64_t>(freed) : 0;
  return state;
}

namespace {

// The last reading of the wait, each GPU's state in it, and how the wait ended.
struct DrmReleaseWait {
  std::optional<drm::DrmReading> last;
  std::vector<DrmReleaseState> states;
  int interrupted_by = 0;
};

// Reads the DRM devices until every GPU is settled (released, or nothing more to wait for),
// the deadline passes, they cannot be read, or a signal interrupts the pause between readings.
DrmReleaseWait wait_for_drm_release(const KillPlan& plan, const DrmPoll& poll_drm, const VerifyOptions& options,
                                    std::vector<DrmGpuVerification>& results) {
  const auto start = Clock::now();
  const auto deadline = start + options.timeout;
  DrmReleaseWait wait;
  wait.states.resize(results.size());
  std::vector<bool> settled(results.size(), false);
  std::size_t pending = results.size();
  while (true) {
    wait.last = poll_drm();
    if (!wait.last) break;
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (settled[i]) continue;
      wait.states[i] = drm_release_state(plan.drm_gpus[i], *wait.last);
      // Without a figure, once the clients are gone there is nothing left to wait for.
      if (wait.states[i].no_figure) {
        settled[i] = true;
        --pending;
        continue;
      }
      if (!wait.states[i].released) continue;
      settled[i] = true;
      results[i].verified = true;
      results[i].freed_bytes = wait.states[i].freed_bytes;
      results[i].verify_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      --pending;
    }
    if (pending == 0 || Clock::now() >= deadline) break;
    if ((wait.interrupted_by = pause_between_readings(options)) != 0) break;
  }
  return wait;
}

// Why a GPU whose device was read is not released: held clients, a KFD context, no figure,
// memory that cannot be told from the targets', or memory still in use unexplained.
std::string unreleased_text(const DrmGpuVerification& v, const PlannedDrmGpu& planned, const DrmReleaseState& state,
                            const std::string& name, double waited) {
  const std::string bytes = v.held_bytes ? format_bytes(*v.held_bytes) : std::string("memory");
  if (!v.still_held_by.empty()) {
    return fmt::format(
        "{}: {} not freed after {:.1f} s: its clients are still held by PID {} (a descriptor inherited or "
        "passed to them; if they are the job's, `gpureap kill {}` ends {})",
        name, bytes, waited, pid_list(v.still_held_by, ", "), pid_list(v.still_held_by, " "),
        v.still_held_by.size() == 1 ? "it" : "them");
  }
  if (!v.kfd_left.empty()) {
    return fmt::format(
        "{}: {} not freed after {:.1f} s: the KFD context of PID {} is still listed (the kernel keeps it while "
        "any descriptor of its /dev/kfd open file is left, e.g. in a worker it forked, and while the process "
        "exits): `gpureap ps` shows who holds /dev/kfd",
        name, bytes, waited, pid_list(v.kfd_left, ", "));
  }
  if (state.no_figure) {
    return fmt::format(
        "{}: its clients are gone from every process's descriptors, but {} reports no VRAM figure: the release "
        "itself cannot be verified (a descriptor in flight in a socket, or a mapping, keeps a client open unseen)",
        name, v.driver.empty() ? std::string("the driver") : v.driver);
  }
  if (state.unattributable) {
    return fmt::format(
        "{}: its clients are gone, but before the kill {} of its VRAM was in use that no client explained "
        "(frees in flight, or a leak), and {} still is after {:.1f} s: a drop cannot be told from the targets' "
        "until the figure is back to what the clients explain; run `gpureap doctor`",
        name, format_bytes(planned.unexplained_base), format_bytes(state.unexplained_now), waited);
  }
  return fmt::format(
      "{}: its clients are gone, but the driver still reports {} more in use than its clients explain after "
      "{:.1f} s (freed later, or leaked): run `gpureap doctor`",
      name, format_bytes(state.unexplained_now > planned.unexplained_base ? state.unexplained_now - planned.unexplained_base
                                                                           : 0),
      waited);
}

// A GPU not verified: interrupted, unreadable, gone from sysfs, or what its last state shows.
void explain_drm_unreleased(DrmGpuVerification& v, const PlannedDrmGpu& planned, const DrmReleaseWait& wait,
                            const DrmReleaseState& state, double waited) {
  const std::string name = fmt::format("{} GPU {}", v.vendor, v.pci_address);
  if (wait.interrupted_by != 0) {
    v.message = interrupted_verification_text(name, wait.interrupted_by);
    return;
  }
  if (!wait.last) {
    v.message = name + ": the DRM devices could not be read: the release cannot be verified";
    return;
  }
  if (state.device_missing) {
    v.message = name + ": no longer in sysfs (unbound, or lost): the release cannot be verified";
    return;
  }
  v.still_held_by = state.still_held_by;
  v.kfd_left = state.kfd_left;
  const drm::DrmDevice* device = wait.last->device_at(planned.pci_address);
  if (planned.baseline_used && device != nullptr && device->vram_used) {
    const auto baseline = *planned.baseline_used;
    const auto used = *device->vram_used;
    v.freed_bytes = baseline > used ? baseline - used : 0;
    v.held_bytes = planned.expected_free_bytes > *v.freed_bytes ? planned.expected_free_bytes - *v.freed_bytes : 0;
  }
  v.unverifiable = v.still_held_by.empty() && v.kfd_left.empty() && state.no_figure;
  v.message = unreleased_text(v, planned, state, name, waited);
}

}  // namespace

std::vector<DrmGpuVerification> verify_drm_release(const KillPlan& plan, const DrmPoll& poll_drm,
                                                   const VerifyOptions& options) {
  std::vector<DrmGpuVerification> results;
  for (const auto& gpu : plan.drm_gpus) {
    DrmGpuVerification v;
    v.pci_address = gpu.pci_address;
    v.vendor = gpu.vendor;
    v.expected_free_bytes = gpu.expected_free_bytes;
    v.driver = gpu.driver;
    results.push_back(std::move(v));
  }
  if (results.empty()) return results;
  const DrmReleaseWait wait = wait_for_drm_release(plan, poll_drm, options, results);
  const double waited = std::chrono::duration<double>(options.timeout).count();
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (!results[i].verified) explain_drm_unreleased(results[i], plan.drm_gpus[i], wait, wait.states[i], waited);
  }
  return results;
}

}  // namespace gpureap
