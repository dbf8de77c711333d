#include "snapshot/holder_events.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

namespace gpureap {

namespace {
// Scans between two reads of a kept holder's details when no event asked for one.
constexpr unsigned kDetailsEvery = 5;
}  // namespace

std::string holder_events_turned_off() {
  const char* value = std::getenv("GPUREAP_HOLDER_EVENTS");
  if (value == nullptr || value[0] == '\0' || std::strcmp(value, "on") == 0) return {};
  if (std::strcmp(value, "off") == 0) return "GPUREAP_HOLDER_EVENTS=off";
  return "GPUREAP_HOLDER_EVENTS is neither on nor off";
}

HolderEvents::HolderEvents(double reconcile_seconds)
    : reconcile_every_(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(reconcile_seconds > 0 ? reconcile_seconds : 1))) {}

void HolderEvents::start(const ProcScanOptions& proc) {
  if (started_) return;
  started_ = true;
  holders::HolderTrackerOptions options;
  options.proc_root = proc.proc_root;
  options.dev_dir = proc.dev_dir;
  if (std::string off = holder_events_turned_off(); !off.empty()) {
    state_.fallback_reason = std::move(off);
  } else {
    tracker_ = holders::HolderTracker::start(std::move(options), state_.fallback_reason);
  }
  state_.active = tracker_ != nullptr;
  // Every process is looked at in every walk (1): only the holders' details are kept.
  if (state_.active) details_ = std::make_shared<FdLookMemory>(1, kDetailsEvery);
  if (!state_.active) state_.fallback_reason = "holders found by walking /proc at every scan: " + state_.fallback_reason;
}

HolderEvents::~HolderEvents() = default;

std::shared_ptr<const std::vector<pid_t>> HolderEvents::before_scan(const ProcScanOptions& proc) {
  const std::lock_guard lock(mutex_);
  start(proc);
  state_.walked = true;
  state_.missed_notes.clear();
  if (!tracker_) return nullptr;
  tracker_->refresh();
  state_.counts = tracker_->counts();
  // The scan keeps details (and descriptors) in the caller's memory where it brings one (top).
  FdLookMemory& memory = proc.memory ? *proc.memory : *details_;
  for (const pid_t pid : tracker_->take_details_changed()) memory.forget_details(pid);
  for (const pid_t pid : tracker_->take_files_changed()) memory.forget_files(pid);
  if (tracker_->needs_walk() || std::chrono::steady_clock::now() >= next_walk_) return nullptr;
  state_.walked = false;
  state_.holders = tracker_->holders();
  return std::make_shared<const std::vector<pid_t>>(state_.holders);
}

void HolderEvents::after_walk(const ProcessTable& table) {
  const std::lock_guard lock(mutex_);
  if (!tracker_) return;
  std::vector<pid_t> walked;
  for (const auto& [pid, process] : table.processes()) {
    if (process.holds_any_gpu_file()) walked.push_back(pid);
  }
  // Events queued while the walk ran: an open the walk saw has its event queued already.
  tracker_->refresh();
  tracker_->reconcile(walked);
  state_.counts = tracker_->counts();
  state_.missed_notes = tracker_->take_missed_notes();
  state_.holders = tracker_->holders();
  next_walk_ = std::chrono::steady_clock::now() + reconcile_every_;
}

bool HolderEvents::changed_since_scan() {
  const std::lock_guard lock(mutex_);
  if (!tracker_) return !started_;  // before the first scan: it walks
  tracker_->refresh();
  state_.counts = tracker_->counts();
  return tracker_->needs_walk() || tracker_->holders() != state_.holders;
}

HolderEventsState HolderEvents::state() const {
  const std::lock_guard lock(mutex_);
  return state_;
}

bool HolderEvents::started() const {
  const std::lock_guard lock(mutex_);
  return started_;
}

void HolderEvents::read_events() {
  const std::lock_guard lock(mutex_);
  if (!tracker_) return;
  tracker_->refresh();
  state_.counts = tracker_->counts();
}

std::shared_ptr<FdLookMemory> HolderEvents::details_memory() const {
  const std::lock_guard lock(mutex_);
  return details_;
}

std::vector<int> HolderEvents::event_fds() const {
  const std::lock_guard lock(mutex_);
  if (!tracker_) return {};
  return {tracker_->device_events_fd(), tracker_->process_events_fd()};
}

}  // namespace gpureap
