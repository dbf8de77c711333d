#include "watch/observation.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "proc/pid_files.hpp"

namespace gpureap {
namespace {

double ticks_per_second() {
  static const double ticks = [] {
    const long t = sysconf(_SC_CLK_TCK);
    return t > 0 ? static_cast<double>(t) : 100.0;
  }();
  return ticks;
}

double now_unix() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

std::uint64_t ticks_of(const ProcessInfo& info) {
  return static_cast<std::uint64_t>(info.cpu_seconds * ticks_per_second() + 0.5);
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// The executable's path as exclusions compare it: a binary replaced by an upgrade reads
// "/usr/bin/x (deleted)".
std::string executable_path(const std::string& exe) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (exe.size() > kDeleted.size() && exe.ends_with(kDeleted)) return exe.substr(0, exe.size() - kDeleted.size());
  return exe;
}

// A zombie worth a rule's look: the driver lists it, it still holds device files (its other
// threads), or its parent is a GPU process or holder that has not reaped it (doctor's rule).
bool gpu_related_zombie(const Snapshot& snapshot, const ProcessInfo& zombie) {
  return snapshot.lists(zombie.pid) || zombie.holds_any_device_file() || snapshot.lists(zombie.ppid) ||
         snapshot.holder(zombie.ppid) != nullptr;
}

FollowedProcess follow(CandidateKind kind, const ProcessInfo& info, UserNames& names) {
  FollowedProcess f;
  Candidate& c = f.facts;
  c.kind = kind;
  c.pid = info.pid;
  c.start_ticks = info.start_time_ticks;
  c.uid = info.real_uid;
  c.user = names.name(info.real_uid);
  c.command = info.command();
  c.exe = executable_path(info.exe);
  c.container = info.container;
  c.state = info.state;
  c.start_unix = info.start_time_unix;
  f.cpu_ticks[info.pid] = ticks_of(info);
  return f;
}

// The outermost ancestor of `p` among `pids` (sorted), or 0.
pid_t outermost_ancestor_in(const ProcessTable& table, const ProcessInfo& p, const std::vector<pid_t>& pids) {
  const auto chain = table.ancestry(p.pid);
  const auto found = std::find_if(chain.rbegin(), chain.rend() - 1, [&pids](pid_t up) {
    return up > 1 && std::binary_search(pids.begin(), pids.end(), up);
  });
  return found == chain.rend() - 1 ? 0 : *found;
}

// ROCm compute processes: each job's root a candidate (or, when the driver lists it, the GPU
// process it is already, with its AMD memory added), the ROCm processes it forked its workers.
void follow_rocm(const Snapshot& snapshot, UserNames& names, std::vector<FollowedProcess>& out,
                 std::map<pid_t, std::size_t>& index) {
  std::vector<pid_t> rocm;
  for (const auto& [pid, info] : snapshot.table.processes()) {
    if (info.state != 'Z' && pid != snapshot.self_pid && snapshot.rocm_compute(info)) rocm.push_back(pid);
  }
  std::sort(rocm.begin(), rocm.end());
  std::vector<std::pair<pid_t, pid_t>> workers;  // (worker, its job's root)
  for (const pid_t pid : rocm) {
    const ProcessInfo& info = *snapshot.table.find(pid);
    if (const pid_t root = outermost_ancestor_in(snapshot.table, info, rocm); root != 0) {
      workers.emplace_back(pid, root);
      continue;
    }
    auto it = index.find(pid);
    if (it == index.end()) {
      it = index.emplace(pid, out.size()).first;
      out.push_back(follow(CandidateKind::RocmProcess, info, names));
    }
    FollowedProcess& job = out[it->second];
    if (job.facts.kind == CandidateKind::GpuProcess || job.facts.kind == CandidateKind::RocmProcess) {
      job.facts.drm_memory = snapshot.drm_memory_of(pid);
    }
  }
  for (const auto& [pid, root] : workers) {
    const auto it = index.find(root);
    if (it == index.end() || index.count(pid)) continue;
    FollowedProcess& job = out[it->second];
    if (job.cpu_ticks.count(pid)) continue;  // the driver's job's worker already
    const ProcessInfo& info = *snapshot.table.find(pid);
    job.workers.emplace_back(pid, info.start_time_ticks);
    job.cpu_ticks[pid] = ticks_of(info);
  }
}

void read_driver_facts(const DriverReading& reading, Look& look) {
  look.driver_readable = !reading.error.has_value();
  if (reading.error) look.driver_problem = "the driver could not count the GPUs";
  for (const auto& gpu : reading.gpus) {
    look.gpu_uuids[gpu.index] = lower(gpu.uuid);
    if (gpu.error || !gpu.processes_complete) look.unreadable_gpus.insert(gpu.index);
  }
}

}  // namespace

std::string_view candidate_kind_name(CandidateKind kind) {
  switch (kind) {
    case CandidateKind::GpuProcess: return "gpu-process";
    case CandidateKind::Orphan: return "orphan";
    case CandidateKind::Zombie: return "zombie";
    case CandidateKind::RocmProcess: return "rocm-process";
  }
  return "gpu-process";
}

std::uint64_t Candidate::memory_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [gpu, bytes] : gpu_memory) total += bytes;
  for (const auto& [pci, bytes] : drm_memory) total += bytes;
  return total;
}

std::vector<FollowedProcess> follow_snapshot(Snapshot& snapshot, UserNames& names, std::unordered_set<pid_t>* not_judged) {
  std::vector<pid_t> need_details;
  for (const auto& [pid, info] : snapshot.table.processes()) {
    if (info.state == 'Z' && !info.details_loaded) need_details.push_back(pid);
  }
  snapshot.table.load_details(need_details);

  std::vector<FollowedProcess> out;
  std::map<pid_t, std::size_t> index;
  for (const auto& view : snapshot.processes) {
    const auto pid = static_cast<pid_t>(view.driver.pid);
    if (view.identity != Identity::Ok || view.linux_process == nullptr) {
      if (not_judged != nullptr && !index.count(pid)) not_judged->insert(pid);
      continue;
    }
    if (not_judged != nullptr) not_judged->erase(pid);
    if (index.count(pid)) continue;
    index[pid] = out.size();
    out.push_back(follow(CandidateKind::GpuProcess, *view.linux_process, names));
  }
  for (const auto& h : snapshot.holders) {
    if (h.role == HolderRole::Worker && h.listed_ancestor) {
      const auto it = index.find(*h.listed_ancestor);
      if (it == index.end()) continue;
      FollowedProcess& job = out[it->second];
      job.workers.emplace_back(h.pid, h.linux_process->start_time_ticks);
      job.cpu_ticks[h.pid] = ticks_of(*h.linux_process);
    } else if (h.role == HolderRole::Orphan && !index.count(h.pid)) {
      index[h.pid] = out.size();
      FollowedProcess f = follow(CandidateKind::Orphan, *h.linux_process, names);
      f.facts.gpus = h.gpus;
      f.facts.orphan_evidence = h.orphan_evidence;
      f.facts.evidence_pids = h.evidence_pids;
      f.context_of = h.context_of.value_or(0);
      out.push_back(std::move(f));
    }
  }
  follow_rocm(snapshot, names, out, index);
  for (const auto& [pid, info] : snapshot.table.processes()) {
    if (info.state != 'Z' || index.count(pid) || !gpu_related_zombie(snapshot, info)) continue;
    index[pid] = out.size();
    FollowedProcess f = follow(CandidateKind::Zombie, info, names);
    f.facts.parent = info.ppid;
    if (const ProcessInfo* parent = snapshot.table.find(info.ppid)) f.facts.parent_start_ticks = parent->start_time_ticks;
    out.push_back(std::move(f));
  }
  return out;
}

DriverReading reading_of(const Snapshot& snapshot) {
  DriverReading reading;
  for (const auto& gpu : snapshot.gpus) reading.gpus.push_back(gpu.reading);
  reading.error = snapshot.driver.count_error;
  return reading;
}

std::optional<Candidate> judge(FollowedProcess& followed, const DriverReading* reading,
                               const std::set<unsigned>& unreadable_gpus) {
  Candidate c = followed.facts;
  c.age_seconds = std::max(0.0, now_unix() - c.start_unix);
  std::uint64_t ticks = 0;
  for (const auto& [member, t] : followed.cpu_ticks) ticks += t;
  c.cpu_seconds = static_cast<double>(ticks) / ticks_per_second();
  c.cpu_read_at = followed.cpu_read_at;
  // A ROCm process is judged on what the last full scan read of it: NVML has nothing to add.
  if (c.kind == CandidateKind::Zombie || c.kind == CandidateKind::RocmProcess) return c;
  // Without the driver a GPU process cannot be judged; an orphan's evidence still stands, but
  // not the memory its dead owner's listing shows.
  if (reading == nullptr) {
    if (c.kind == CandidateKind::GpuProcess) return std::nullopt;
    return c;
  }
  const pid_t memory_of = c.kind == CandidateKind::Orphan ? followed.context_of : c.pid;
  bool util_known = true;
  std::set<unsigned> gpus(c.gpus.begin(), c.gpus.end());
  if (c.kind == CandidateKind::GpuProcess) gpus.clear();
  for (const auto& gpu : reading->gpus) {
    for (const auto& p : gpu.processes) {
      if (memory_of == 0 || static_cast<pid_t>(p.pid) != memory_of) continue;
      c.gpu_memory[gpu.index] += p.used_memory.value_or(0);
      if (c.kind != CandidateKind::GpuProcess) continue;
      gpus.insert(gpu.index);
      if (!gpu.process_utilization_known) util_known = false;
      c.sm_util_percent = std::max(c.sm_util_percent.value_or(0), p.sm_util_percent.value_or(0));
    }
  }
  c.gpus.assign(gpus.begin(), gpus.end());
  if (c.kind == CandidateKind::GpuProcess) {
    if (!util_known) c.sm_util_percent.reset();
    // Where it was last seen, should that GPU become unreadable.
    if (!c.gpus.empty()) followed.facts.gpus = c.gpus;
  }
  const auto& where = c.gpus.empty() ? followed.facts.gpus : c.gpus;
  if (std::any_of(where.begin(), where.end(), [&](unsigned g) { return unreadable_gpus.count(g) > 0; })) {
    return std::nullopt;
  }
  return c;
}

Observer::Observer(SnapshotOptions options, double full_scan_seconds)
    : options_(std::move(options)), full_scan_seconds_(full_scan_seconds), stats_(options_.proc.proc_root) {}

SnapshotSource& Observer::source() {
  if (!source_) source_ = std::make_unique<SnapshotSource>(options_);
  return *source_;
}

Look Observer::look(bool full) {
  const auto now = std::chrono::steady_clock::now();
  const bool due = !have_full_ || now - last_full_ >= std::chrono::duration<double>(full_scan_seconds_);
  if (!full && !due) {
    if (auto quick = quick_look()) return std::move(*quick);
  }
  return full_look();
}

Look Observer::full_look() {
  // A driver that did not load is tried again at every full scan (it may load after boot).
  if (!source_ || (have_full_ && !source_->driver_loaded())) source_ = std::make_unique<SnapshotSource>(options_);
  auto snapshot = source_->take(ProcScanScope::Holders);
  ++full_scans_;
  last_full_ = std::chrono::steady_clock::now();
  have_full_ = true;
  Look look;
  look.full_scan = true;
  const DriverReading reading = reading_of(*snapshot);
  last_reading_ = reading;
  last_reading_at_ = last_full_;
  events_active_ = snapshot->holder_events && snapshot->holder_events->active;
  if (snapshot->driver.loaded) {
    read_driver_facts(reading, look);
  } else {
    look.driver_problem = snapshot->driver.message;
  }
  // A GPU process the driver cannot list now (its GPU is lost, or the driver is unreadable) is
  // still followed while it lives: judged again, with its timers, once it can be read.
  std::unordered_map<pid_t, FollowedProcess> kept;
  for (auto& [pid, f] : followed_) {
    if (f.facts.kind != CandidateKind::GpuProcess) continue;
    const bool unreadable = !look.driver_readable || std::any_of(f.facts.gpus.begin(), f.facts.gpus.end(), [&](unsigned g) {
                              return look.unreadable_gpus.count(g) > 0;
                            });
    if (unreadable && refresh_cpu(f, last_full_)) kept.emplace(pid, std::move(f));
  }
  followed_ = std::move(kept);
  not_judged_.clear();
  const std::vector<pid_t>* heard = events_active_ ? &snapshot->holder_events->holders : nullptr;
  const auto end_heard = [heard](pid_t pid) { return std::binary_search(heard->begin(), heard->end(), pid); };
  for (FollowedProcess& f : follow_snapshot(*snapshot, user_names_, &not_judged_)) {
    const pid_t pid = f.facts.pid;
    f.cpu_read_at = last_full_;
    // A zombie's end (its reaping) makes no event.
    f.end_heard = heard != nullptr && f.facts.kind != CandidateKind::Zombie && end_heard(pid) &&
                  std::all_of(f.workers.begin(), f.workers.end(), [&](const auto& w) { return end_heard(w.first); });
    followed_.insert_or_assign(pid, std::move(f));
  }
  sentinels_ = exit_sentinels(*snapshot);
  rescan_wanted_ = false;
  look.snapshot = std::shared_ptr<Snapshot>(std::move(snapshot));
  return finish(std::move(look), look.driver_readable ? &reading : nullptr);
}

// The process's own stat and its workers': false when it is gone, or its PID names another.
bool Observer::refresh_cpu(FollowedProcess& followed, std::chrono::steady_clock::time_point now) {
  const auto stat = stats_.read(followed.facts.pid, followed.facts.start_ticks);
  if (!stat) return false;
  followed.cpu_read_at = now;
  followed.facts.state = stat->state;
  followed.cpu_ticks[followed.facts.pid] = stat->utime_ticks + stat->stime_ticks;
  std::erase_if(followed.workers, [&](const std::pair<pid_t, std::uint64_t>& worker) {
    const auto w = stats_.read(worker.first, worker.second);
    if (!w || w->state == 'Z') {
      followed.cpu_ticks.erase(worker.first);
      return true;
    }
    followed.cpu_ticks[worker.first] = w->utime_ticks + w->stime_ticks;
    return false;
  });
  return true;
}

// Whether a process whose end makes an orphan or a zombie has ended (or exited unreaped) since
// the last full scan. Processes followed were read just before: their state is not read again.
bool Observer::sentinel_ended() {
  for (const auto& [pid, start_ticks] : sentinels_) {
    char state = '?';
    if (const auto it = followed_.find(pid); it != followed_.end() && it->second.facts.start_ticks == start_ticks) {
      state = it->second.facts.state;
    } else {
      const auto stat = stats_.read(pid, start_ticks);
      if (!stat) return true;
      state = stat->state;
    }
    if (state == 'Z') return true;
  }
  return false;
}

bool Observer::take_rescan_token() {
  const auto now = std::chrono::steady_clock::now();
  if (tokens_at_ != std::chrono::steady_clock::time_point{}) {
    const double refill = std::chrono::duration<double>(now - tokens_at_) / kTriggeredScanGap;
    rescan_tokens_ = std::min(kTriggeredScanBurst, rescan_tokens_ + refill);
  }
  tokens_at_ = now;
  if (rescan_tokens_ < 1) return false;
  rescan_tokens_ -= 1;
  return true;
}

std::optional<Look> Observer::quick_look() {
  Look look;
  const auto now = std::chrono::steady_clock::now();
  // Between the driver's readings the last one stands for it (set_driver_read_seconds).
  std::optional<DriverReading> fresh;
  const DriverReading* reading = last_reading_ ? &*last_reading_ : nullptr;
  const bool reading_driver =
      driver_every_look() || !last_reading_ || now - last_reading_at_ >= std::chrono::duration<double>(driver_read_seconds_);
  if (reading_driver) {
    const double cpu_before = thread_cpu_seconds();
    if (source_) fresh = source_->read_driver_only(DriverReadScope::Processes, reading);
    driver_cpu_seconds_ += thread_cpu_seconds() - cpu_before;
    reading = fresh ? &*fresh : nullptr;
  }
  ++quick_looks_;
  if (reading) {
    read_driver_facts(*reading, look);
  } else {
    look.driver_problem = "the NVML library is not loaded";
  }
  std::map<pid_t, std::set<unsigned>> listed_now;
  if (look.driver_readable) {
    for (const auto& gpu : reading->gpus) {
      for (const auto& p : gpu.processes) listed_now[static_cast<pid_t>(p.pid)].insert(gpu.index);
    }
  }
  bool want_full = false;
  for (const auto& [pid, gpus] : listed_now) {
    if (not_judged_.count(pid)) continue;
    const auto it = followed_.find(pid);
    if (it != followed_.end() && it->second.facts.kind == CandidateKind::GpuProcess) continue;
    // Listed for the first time (or an orphan or zombie now listed): who it is needs a full read.
    if (procfs::read_stat(options_.proc.proc_root, pid)) {
      want_full = true;
    } else {
      not_judged_.insert(pid);  // not in this PID namespace, or exited: nothing here to judge
    }
  }
  for (auto it = followed_.begin(); it != followed_.end();) {
    FollowedProcess& f = it->second;
    bool keep = true;
    if (f.facts.kind == CandidateKind::GpuProcess && look.driver_readable) {
      const bool on_unreadable = std::any_of(f.facts.gpus.begin(), f.facts.gpus.end(),
                                             [&](unsigned g) { return look.unreadable_gpus.count(g) > 0; });
      if (!listed_now.count(f.facts.pid) && !on_unreadable) {
        keep = false;  // it no longer uses a GPU (or has exited: then the sentinels tell what that changed)
        // Alive without a context: its workers are no longer a running job's.
        const auto stat = procfs::read_stat(options_.proc.proc_root, f.facts.pid);
        if (stat && stat->start_time_ticks == f.facts.start_ticks && stat->state != 'Z') rescan_wanted_ = true;
      }
    }
    const bool listed = listed_now.count(f.facts.pid) > 0;
    const char state_before = f.facts.state;
    // Between the driver's readings a process whose end is heard keeps its last CPU reading.
    if (keep && (reading_driver || !f.end_heard) && !refresh_cpu(f, now)) {
      keep = false;
      // Exited while the driver still lists it: workers it forked may now hold its memory.
      if (f.facts.kind == CandidateKind::GpuProcess && listed) rescan_wanted_ = true;
    }
    // Exited but not reaped: a zombie, and its workers (which keep it listed) are orphans.
    // (Once: a zombie whose other threads still hold the GPU is followed as it is.)
    if (keep && f.facts.kind == CandidateKind::GpuProcess && f.facts.state == 'Z' && state_before != 'Z') rescan_wanted_ = true;
    if (keep && f.facts.kind == CandidateKind::Zombie && f.facts.state != 'Z') keep = false;
    it = keep ? std::next(it) : followed_.erase(it);
  }
  if (!rescan_wanted_ && sentinel_ended()) rescan_wanted_ = true;
  // A process that opened a device file, or a holder's new child: the kernel's events tell
  // (snapshot/holder_events.hpp), and the full look reads only the holders.
  if (!rescan_wanted_ && source_ && source_->holders_changed()) rescan_wanted_ = true;
  // Every full scan a look asks for comes from the bucket: a user starting and ending GPU
  // processes in a loop gets one every kTriggeredScanGap, not one a look. What asked for it
  // stays asked (a new PID stays unfollowed, rescan_wanted_ stays set) until a scan is taken.
  if ((want_full || rescan_wanted_) && take_rescan_token()) return std::nullopt;
  if (reading_driver) stats_.close_unread();  // what this look no longer follows (it read all it does)
  Look done = finish(std::move(look), look.driver_readable ? reading : nullptr);
  if (fresh) {
    last_reading_ = std::move(fresh);
    last_reading_at_ = now;
  }
  return done;
}

Look Observer::finish(Look look, const DriverReading* reading) {
  look.at = std::chrono::steady_clock::now();
  for (auto& [pid, f] : followed_) {
    if (auto c = judge(f, reading, look.unreadable_gpus)) {
      look.candidates.push_back(std::move(*c));
    } else {
      look.frozen.insert(f.facts.key());
    }
  }
  return look;
}

}  // namespace gpureap
