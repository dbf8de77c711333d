#include "reap/reap.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "kill/cgroup_kill.hpp"
#include "proc/pid_files.hpp"

namespace gpureap {
namespace {

// The GPUs a process uses: listed on by the driver, or holding the device file of.
std::set<unsigned> gpus_of(const Snapshot& snapshot, pid_t pid) {
  std::set<unsigned> out;
  for (const auto& view : snapshot.processes) {
    if (static_cast<pid_t>(view.driver.pid) == pid) out.insert(view.gpu_index);
  }
  if (const ProcessInfo* p = snapshot.table.find(pid)) {
    for (const auto& f : p->device_files) {
      if (f.kind != DeviceFileKind::Gpu || f.minor < 0) continue;
      if (const GpuView* gpu = snapshot.gpu_by_minor(static_cast<unsigned>(f.minor))) out.insert(gpu->reading.index);
    }
  }
  return out;
}

bool listed_by_driver(const Snapshot& snapshot, pid_t pid) {
  return std::any_of(snapshot.processes.begin(), snapshot.processes.end(), [&](const GpuProcessView& v) {
    return static_cast<pid_t>(v.driver.pid) == pid && v.identity == Identity::Ok;
  });
}

std::string gpu_words(const std::set<unsigned>& gpus) {
  std::string out;
  for (unsigned g : gpus) out += fmt::format("{}{}", out.empty() ? "" : ",", g);
  return out;
}

// The nearest ancestor of `p` that is a ROCm job's root (rocm_compute), when `p` holds /dev/kfd
// itself (a forked worker inherits it, without a KFD context of its own); 0 otherwise.
pid_t rocm_job_of(const Snapshot& snapshot, const ProcessInfo& p) {
  return Snapshot::holds_kfd(p) ? snapshot.rocm_ancestor(p) : 0;
}

// Why a process of the user counts as a GPU user, or "" when it does not.
std::string gpu_user_reason(const Snapshot& snapshot, const ProcessInfo& p, const std::set<unsigned>& used) {
  if (listed_by_driver(snapshot, p.pid)) return fmt::format("the driver lists it on GPU {}", gpu_words(used));
  if (!used.empty()) return fmt::format("holds the device file of GPU {}", gpu_words(used));
  if (p.holds_any_device_file()) return "holds an NVIDIA device file";
  if (snapshot.rocm_compute(p)) return "ROCm compute: holds /dev/kfd and has its own KFD context";
  if (const pid_t job = rocm_job_of(snapshot, p); job != 0) {
    return fmt::format("worker of ROCm job {}: holds the /dev/kfd it inherited", job);
  }
  if (const pid_t job = snapshot.held_kfd_context(p); job != 0) {
    return fmt::format("keeps the KFD context of exited ROCm job {} alive: holds its /dev/kfd and its render client", job);
  }
  return {};
}

// A process of the user holding only AMD or Intel display and render nodes.
bool drm_graphics_only(const Snapshot& snapshot, const ProcessInfo& p) {
  return p.holds_any_drm_file() && !p.holds_any_device_file() && !snapshot.rocm_compute(p) &&
         rocm_job_of(snapshot, p) == 0 && snapshot.held_kfd_context(p) == 0;
}

}  // namespace

std::string resolve_cgroup_dir(const std::string& path, const std::string& proc_root, std::string& error) {
  const auto mount = cgroupfs::cgroup2_mount(proc_root);
  if (!mount) {
    error = fmt::format("--cgroup {}: no cgroup v2 hierarchy is mounted here (see /proc/self/mountinfo)", path);
    return {};
  }
  std::string candidate = path;
  const bool under_mount = path == *mount || path.rfind(*mount + "/", 0) == 0;
  // A path into /sys is a filesystem path, never one relative to the mount (as /proc/PID/cgroup
  // shows it): joined to a mount elsewhere (a hybrid host's /sys/fs/cgroup/unified) it would
  // name something else, or nothing with a misleading message.
  if (!under_mount && (path == "/sys" || path.rfind("/sys/", 0) == 0)) {
    error = fmt::format("--cgroup {}: not under the cgroup v2 hierarchy, which is mounted at {} (give a path under "
                        "it, or relative to it as /proc/PID/cgroup shows)",
                        path, *mount);
    return {};
  }
  if (!under_mount) {
    std::string relative = path;
    while (!relative.empty() && relative.front() == '/') relative.erase(relative.begin());
    candidate = *mount + "/" + relative;
  }
  char resolved[PATH_MAX];
  struct stat info {};
  if (::realpath(candidate.c_str(), resolved) == nullptr || ::stat(resolved, &info) != 0 || !S_ISDIR(info.st_mode)) {
    error = fmt::format("--cgroup {}: no such cgroup ({} does not exist)", path, candidate);
    return {};
  }
  const std::string dir = resolved;
  if (dir == *mount) {
    error = fmt::format("--cgroup {}: that is the root of the cgroup hierarchy (every process on the host), not a job's cgroup", path);
    return {};
  }
  if (dir.rfind(*mount + "/", 0) != 0 || ::stat((dir + "/cgroup.procs").c_str(), &info) != 0) {
    error = fmt::format("--cgroup {}: {} is not a cgroup v2 directory under {}", path, dir, *mount);
    return {};
  }
  return dir;
}

namespace {

// Candidates: the cgroup's members, or every driver-listed PID and device-file holder; sorted,
// each once, with their details loaded.
std::vector<pid_t> reap_candidates(Snapshot& snapshot, const ReapCriteria& criteria) {
  std::vector<pid_t> candidates;
  if (criteria.cgroup_dir) {
    candidates = criteria.cgroup_pids;
  } else {
    for (const auto& v : snapshot.processes) {
      if (v.linux_process != nullptr && v.identity == Identity::Ok) candidates.push_back(v.linux_process->pid);
    }
    for (const auto& [pid, info] : snapshot.table.processes()) {
      if (info.holds_any_device_file() || info.holds_any_drm_file()) candidates.push_back(pid);
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  snapshot.table.load_details(candidates);
  return candidates;
}

// With --gpu: whether the process uses one of the chosen NVIDIA or DRM GPUs.
bool on_chosen_gpu(const Snapshot& snapshot, const ReapCriteria& criteria, pid_t pid, const std::set<unsigned>& used) {
  if (!criteria.gpus) return true;
  bool on_selected = std::any_of(used.begin(), used.end(), [&](unsigned g) { return criteria.gpus->count(g) > 0; });
  if (!on_selected && criteria.drm_gpus && !criteria.drm_gpus->empty()) {
    const auto drm_used = snapshot.drm_memory_of(pid);
    on_selected = std::any_of(drm_used.begin(), drm_used.end(), [&](const auto& entry) {
      return criteria.drm_gpus->count(entry.first) > 0;
    });
  }
  return on_selected;
}

// Why a candidate is spared: named by --except, or an ancestor of gpureap; "" when it is not.
std::string spared_reason(const ReapCriteria& criteria, const PlanPolicy& policy, pid_t pid, const ProcessInfo& p) {
  const std::string exe_name = executable_basename(p.exe);  // a replaced binary stays itself
  std::string spared_why;
  // By the executable's name, never by comm: a process names itself, so a comm that equals
  // an --except name would let any job escape its cleanup.
  for (const auto& name : criteria.except) {
    if (!exe_name.empty() && name == exe_name) spared_why = "--except " + name;
  }
  if (std::find(policy.self_ancestry.begin(), policy.self_ancestry.end(), pid) != policy.self_ancestry.end()) {
    spared_why = "an ancestor of gpureap (the shell or job running it)";
  }
  return spared_why;
}

// An exited listed PID whose context only selected processes keep alive is the job's memory.
void list_exited_contexts(const Snapshot& snapshot, ReapSelection& out) {
  for (const auto& v : snapshot.processes) {
    if (v.held_by.empty()) continue;
    const bool ours = std::all_of(v.held_by.begin(), v.held_by.end(), [&](pid_t holder) {
      return std::any_of(out.selection.processes.begin(), out.selection.processes.end(),
                         [&](const SelectedProcess& s) { return s.pid == holder; });
    });
    if (ours) out.listed_pids.insert(static_cast<pid_t>(v.driver.pid));
  }
}

}  // namespace

ReapSelection select_reap(Snapshot& snapshot, const ReapCriteria& criteria, const PlanPolicy& policy) {
  ReapSelection out;
  for (pid_t pid : reap_candidates(snapshot, criteria)) {
    const ProcessInfo* p = snapshot.table.find(pid);
    // Gone since the cgroup was read; a kernel thread; gpureap itself (its own NVML descriptors).
    if (p == nullptr || p->kernel_thread || pid == policy.self) continue;
    if (criteria.uids && !(p->details_loaded && criteria.uids->count(p->real_uid))) continue;
    const std::set<unsigned> used = gpus_of(snapshot, pid);
    std::string why;
    if (criteria.cgroup_dir) {
      why = "in cgroup " + *criteria.cgroup_dir;
      if (!used.empty()) why += "; uses GPU " + gpu_words(used);
    } else {
      why = gpu_user_reason(snapshot, *p, used);
      if (why.empty() && drm_graphics_only(snapshot, *p)) {
        out.spared.push_back({pid, p->command(),
                              "holds only AMD or Intel display or render nodes: a desktop or graphics client, not "
                              "provably a job's (its cgroup would prove it: --cgroup)"});
        continue;
      }
      if (why.empty()) continue;
      why = fmt::format("GPU process of uid {}: {}", p->real_uid, why);
    }
    if (!on_chosen_gpu(snapshot, criteria, pid, used)) continue;
    if (const std::string spared_why = spared_reason(criteria, policy, pid, *p); !spared_why.empty()) {
      out.spared.push_back({pid, p->command(), spared_why});
      // Spared, but its GPU memory is still the job's: the GPU is not called empty while it
      // holds some (the report names it).
      if (listed_by_driver(snapshot, pid)) out.listed_pids.insert(pid);
      continue;
    }
    SelectedProcess s;
    s.pid = pid;
    s.reason = why;
    out.selection.processes.push_back(s);
    out.gpus_used.insert(used.begin(), used.end());
    if (listed_by_driver(snapshot, pid)) out.listed_pids.insert(pid);
  }
  list_exited_contexts(snapshot, out);
  return out;
}

std::vector<Survivor> find_survivors(const KillReport& report, const ReapSelection& selection,
                                     const ReapCriteria& criteria, const std::string& proc_root) {
  std::vector<Survivor> out;
  std::set<pid_t> seen;
  auto add = [&](pid_t pid, const std::string& why) {
    if (!seen.insert(pid).second) return;
    const auto stat = procfs::read_stat(proc_root, pid);
    if (!stat || stat->state == 'Z' || stat->state == 'X') return;
    Survivor s;
    s.pid = pid;
    s.state = stat->state;
    s.command = stat->comm;
    if (s.state == 'D') s.wchan = procfs::read_wchan(proc_root, pid);
    s.why = why;
    out.push_back(std::move(s));
  };
  for (const auto& o : report.targets) {
    if (o.outcome == KillOutcome::StuckInD) add(o.pid, "stuck in D state: SIGKILL takes effect only when the kernel call returns");
    if (o.outcome == KillOutcome::Survived) add(o.pid, survivor_words(o, report.settings));
    if (o.outcome == KillOutcome::PermissionDenied) add(o.pid, "not permitted to signal it");
    if (o.outcome == KillOutcome::Refused) add(o.pid, "refused: " + o.detail);
  }
  // With --gpus the cgroup's other processes are left alone on purpose.
  if (criteria.cgroup_dir && !criteria.gpus) {
    std::set<pid_t> spared;
    for (const auto& s : selection.spared) spared.insert(s.pid);
    std::set<pid_t> selected;
    for (const auto& s : selection.selection.processes) selected.insert(s.pid);
    for (pid_t pid : cgroupfs::cgroup_subtree_pids(*criteria.cgroup_dir)) {
      if (spared.count(pid)) continue;
      if (criteria.uids) {
        const auto status = procfs::read_status(proc_root, pid);
        if (!status || !criteria.uids->count(status->real_uid)) continue;
      }
      add(pid, selected.count(pid) ? "still in the cgroup" : "joined the cgroup during the reap");
    }
  }
  return out;
}

ReapVerdict reap_verdict(const ReapReport& report) {
  if (report.kill.interrupted_by != 0) return ReapVerdict::Interrupted;
  const bool remains = std::any_of(report.survivors.begin(), report.survivors.end(), [&](const Survivor& s) {
    return std::none_of(report.kill.targets.begin(), report.kill.targets.end(), [&](const TargetOutcome& o) {
      return o.pid == s.pid && (o.outcome == KillOutcome::PermissionDenied || o.outcome == KillOutcome::Refused);
    });
  });
  const bool unverified = (!report.driver_unreadable && std::any_of(report.gpus.begin(), report.gpus.end(),
                                                                    [](const ReapGpuResult& g) { return !g.verified; })) ||
                          std::any_of(report.kill.drm_gpus.begin(), report.kill.drm_gpus.end(),
                                      [](const DrmGpuVerification& g) { return !g.verified; });
  if (remains || unverified) return ReapVerdict::Remains;
  const auto any = [&](KillOutcome outcome) {
    return std::any_of(report.kill.targets.begin(), report.kill.targets.end(),
                       [&](const TargetOutcome& o) { return o.outcome == outcome; });
  };
  if (any(KillOutcome::PermissionDenied)) return ReapVerdict::PermissionDenied;
  if (any(KillOutcome::Refused)) return ReapVerdict::Refused;
  if (report.driver_unreadable) return ReapVerdict::DriverUnreadable;
  return ReapVerdict::Ok;
}

}  // namespace gpureap
