#include "job/job_ending.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "kill/escalation.hpp"
#include "kill/kill_execution.hpp"
#include "kill/memory_verification.hpp"
#include "kill/mps_client_ending.hpp"
#include "kill/pid_ref.hpp"
#include "kill/tree_sweep.hpp"
#include "proc/ancestry.hpp"
#include "proc/pid_files.hpp"
#include "proc/proc_io.hpp"

namespace gpureap::job {
namespace {

using Clock = std::chrono::steady_clock;

// How long a SIGKILLed process may take to be gone before it counts as stuck.
constexpr std::chrono::milliseconds kKillGrace{2000};

std::string exe_basename(const std::string& proc_root, pid_t pid) {
  char target[4096];
  const std::string link = fmt::format("{}/{}/exe", proc_root, pid);
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return {};
  return executable_basename(std::string(target, static_cast<std::size_t>(n)));
}

// A private directory for the dumps: 0700, made fresh (mkdtemp) unless the user named one.
bool ensure_evidence_dir(std::string& dir, std::vector<std::string>& notes) {
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = fmt::format("{}/gpureap-run.{}.XXXXXX", tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp", getpid());
    if (mkdtemp(pattern.data()) == nullptr) {
      notes.push_back(fmt::format("no dumps: cannot create a directory for them: {}", std::strerror(errno)));
      return false;
    }
    dir = pattern;
    return true;
  }
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    notes.push_back(fmt::format("no dumps: cannot create {}: {}", dir, std::strerror(errno)));
    return false;
  }
  struct stat st{};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    notes.push_back(fmt::format("no dumps: {} is not a directory", dir));
    return false;
  }
  // A directory someone else made (or may write to) could hold a FIFO at a dump's name, which
  // would hang gpureap while the job is left running, or let them read the dumps.
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    notes.push_back(fmt::format("no dumps: {} belongs to uid {} or others may write to it: give a directory of your own",
                                dir, st.st_uid));
    return false;
  }
  return true;
}

void merge(std::vector<TargetOutcome>& ended, const std::vector<TargetResult>& results, bool after_kill) {
  for (const auto& r : results) {
    // Exited on its own between the listing and the first signal (a DataLoader worker whose
    // rank had just died, still delivering its parent-death signal): nothing of the job was
    // left there, and nothing was done to it.
    const bool ended_by_itself = r.signals.empty() && (r.outcome == KillOutcome::AlreadyGone || r.outcome == KillOutcome::Zombie);
    const pid_t pid = r.pid;
    if (ended_by_itself && std::none_of(ended.begin(), ended.end(), [pid](const TargetOutcome& t) { return t.pid == pid; })) {
      continue;
    }
    auto it = std::find_if(ended.begin(), ended.end(), [&](const TargetOutcome& t) { return t.pid == r.pid; });
    if (it == ended.end()) {
      ended.push_back(TargetOutcome{});
      it = ended.end() - 1;
      it->pid = r.pid;
    }
    it->outcome = (after_kill && r.outcome == KillOutcome::ExitedAfterSignal) ? KillOutcome::Killed : r.outcome;
    it->signals.insert(it->signals.end(), r.signals.begin(), r.signals.end());
    if (r.exit_ms) it->exit_ms = r.exit_ms;
    if (r.final_state != '?') it->final_state = r.final_state;
    it->wchan = r.wchan;
    it->discovered = it->discovered || r.discovered;
    // After SIGKILL, what the first step said ("still alive after SIGTERM") is no longer true.
    if (after_kill || !r.detail.empty()) it->detail = r.detail;
    if (!r.cgroup_killed.empty()) it->cgroup_killed = r.cgroup_killed;
  }
}

// Descriptors left free while members are pinned: the ladder reads /proc, freezes cgroups
// and sweeps descendants with descriptors of its own.
constexpr std::size_t kLadderReserve = 16;

bool out_of_descriptors(const PinResult& pin) {
  return pin.status == PinStatus::Error && (pin.error == EMFILE || pin.error == ENFILE);
}

// One step of the ladder over the members as they are now.
// Each member holds a pidfd until the step ends, so under a low open-file limit (a job of
// thousands, or `ulimit -n` small) the members go through the ladder in batches that leave
// the ladder descriptors of its own: pinned all at once, they would leave it none, and every
// member would read as "already gone" while it runs on. A member that cannot be pinned even alone
// goes into `ended` as a survivor: it was not signalled, and must not vanish from the report.
// Both MPS programs' names cut to these 15 bytes. The name only says that a full snapshot is
// worth taking: a role comes from the snapshot's proof alone (snapshot/mps_roles.hpp).
bool named_mps(const JobMember& member) { return member.stat.comm == "nvidia-cuda-mps"; }

// A control daemon or server the job started ends with the job only when every client it serves
// is the job's too: signalled, it ends the GPU work of all its clients (kill refuses the same).
// A client whose server is unproven might be one of them: it keeps the daemon running too.
void spare_shared_mps_daemons(const Snapshot& snapshot, const Members& left, std::set<pid_t>& spared,
                              RunReport& report) {
  for (const auto& [member_pid, member] : left) {
    const pid_t pid = member_pid;  // (a structured binding cannot be captured in C++20)
    const bool server = std::any_of(snapshot.processes.begin(), snapshot.processes.end(), [&](const auto& v) {
      return v.mps_role == MpsRole::Server && static_cast<pid_t>(v.driver.pid) == pid;
    });
    if (!server && snapshot.mps_daemon(pid) == nullptr) continue;
    const ProcessInfo* process = snapshot.table.find(pid);
    if (process == nullptr || process->start_time_ticks != member.stat.start_time_ticks) continue;
    std::vector<pid_t> outside = mps_clients_served_by(snapshot, pid, true);
    std::erase_if(outside, [&](pid_t client) { return left.count(client) > 0; });
    if (outside.empty()) continue;
    spared.insert(pid);
    report.ended.push_back(TargetOutcome{
        .pid = pid,
        .outcome = KillOutcome::Survived,
        .detail = fmt::format("an MPS {} the job started serves clients outside the job: {}; ending it would end their "
                              "GPU work, so it was left running: quit it once they are done (echo quit | "
                              "nvidia-cuda-mps-control, with its CUDA_MPS_PIPE_DIRECTORY)",
                              server ? "server" : "control daemon", pids_with_users(snapshot, outside))});
  }
}

// MPS clients are ended through terminate_client before any signal (kill/mps_client_ending),
// so their server and its other clients, other jobs' and users' included, keep working. The
// members that must not be signalled are returned: terminate_client failed for them, and each
// is reported as a survivor with why and what to do. So are an MPS control daemon or server the
// job started that serves clients outside the job (spare_shared_mps_daemons).
std::set<pid_t> end_mps_clients(const EndingSettings& settings, const Members& left, RunReport& report) {
  std::set<pid_t> spared;
  if (!settings.driver) return spared;
  SnapshotSource& source = settings.driver();
  // The full snapshot (the socket table ties a client to its server) only when the driver
  // lists a member as an MPS client, or a member has the MPS programs' name.
  bool any = std::any_of(left.begin(), left.end(), [](const auto& m) { return named_mps(m.second); });
  if (!any) {
    const auto reading = source.read_driver_only();
    for (const auto& gpu : reading ? reading->gpus : std::vector<GpuReading>{}) {
      for (const auto& p : gpu.processes) any = any || (p.types.mps && left.count(static_cast<pid_t>(p.pid)) > 0);
    }
  }
  if (!any) return spared;
  const auto snapshot = source.take();
  spare_shared_mps_daemons(*snapshot, left, spared, report);
  for (const auto& [pid, member] : left) {
    const auto link = find_mps_client(*snapshot, pid);
    const ProcessInfo* process = snapshot->table.find(pid);
    // Another process on the member's PID by now: the ladder's pin leaves it alone.
    if (!link || process == nullptr || process->start_time_ticks != member.stat.start_time_ticks) continue;
    const MpsClientEnding ending = end_mps_client_work(*link, false, settings.kill_timeout, settings.proc_root);
    if (ending.may_signal) {
      report.notes.push_back(ending.note);
      continue;
    }
    spared.insert(pid);
    report.ended.push_back(TargetOutcome{
        .pid = pid,
        .outcome = KillOutcome::Refused,
        .detail = fmt::format("{}, or signal it anyway with `gpureap kill {} --force`", ending.refusal, pid)});
  }
  return spared;
}

// The members whose tree holds a spared one: the ladder's sweep of their descendants would
// signal it.
std::set<pid_t> ancestors_of(const Members& members, const std::set<pid_t>& spared) {
  std::set<pid_t> out;
  for (pid_t pid : spared) {
    const auto chain = ancestry_walk(pid, [&members](pid_t at) -> std::optional<pid_t> {
      const auto it = members.find(at);
      if (it == members.end()) return std::nullopt;
      return it->second.stat.ppid;
    });
    out.insert(chain.begin() + 1, chain.end());
  }
  return out;
}

std::vector<TargetResult> signal_members(const EndingSettings& settings, const Members& members, int first_signal,
                                         std::chrono::milliseconds timeout, const std::string& reason,
                                         const std::set<pid_t>& spared, std::vector<TargetOutcome>& ended) {
  raise_open_file_limit();
  EscalationOptions options;
  options.first_signal = first_signal;
  options.timeout = timeout;
  options.escalate = false;  // the next step is ours: evidence first, then SIGKILL
  options.kill_grace = kKillGrace;
  options.proc_root = settings.proc_root;
  std::vector<TargetResult> results;
  const std::set<pid_t> no_sweep = ancestors_of(members, spared);
  auto next = members.begin();
  while (next != members.end()) {
    const std::size_t budget = std::max<std::size_t>(sweep::pidfd_budget(kLadderReserve), 1);
    std::vector<EscalationTarget> targets;
    for (; next != members.end() && targets.size() < budget; ++next) {
      const auto& [pid, member] = *next;
      if (spared.count(pid)) continue;
      PinResult pin;
      if (member.proven) {
        pin = PidRef::pin(pid, member.stat.start_time_ticks, settings.proc_root);
      } else {
        pin.status = PinStatus::Error;  // its membership was never shown through a pin
        pin.error = EMFILE;
      }
      if (pin.status == PinStatus::Gone || pin.status == PinStatus::IdentityChanged) continue;  // ended meanwhile
      if (out_of_descriptors(pin) && !targets.empty()) break;  // this batch first; retried in the next
      if (pin.status != PinStatus::Ok) {
        const pid_t failed = pid;  // a structured binding cannot be captured in C++20
        auto it = std::find_if(ended.begin(), ended.end(), [failed](const TargetOutcome& t) { return t.pid == failed; });
        if (it == ended.end()) it = ended.insert(ended.end(), TargetOutcome{.pid = pid});
        describe_unpinned(pid, pin, *it);
        continue;
      }
      EscalationTarget target;
      target.ref = std::move(pin.ref);
      // Whatever it forks meanwhile belongs to the job too, unless a spared member is below it.
      target.sweep_descendants = no_sweep.count(pid) == 0;
      target.reason = reason;
      targets.push_back(std::move(target));
    }
    if (targets.empty()) continue;
    EscalationRun run = run_ladder(std::move(targets), options, audit_hooks(settings.audit));
    results.insert(results.end(), std::make_move_iterator(run.results.begin()),
                   std::make_move_iterator(run.results.end()));
  }
  return results;
}

void verify(const EndingSettings& settings, RunReport& report) {
  if (report.gpus.empty()) return;
  report.memory_checked = true;
  const auto start = Clock::now();
  SnapshotSource& source = settings.driver();
  KillPlan plan;
  for (const auto& use : report.gpus) {
    PlannedGpu gpu;
    gpu.index = use.index;
    gpu.expected_free_bytes = use.job_last_bytes;
    gpu.target_pids = use.job_pids;
    if (!use.seen) {
      gpu.baseline_used = use.used_at_end_bytes;  // the growth must come back from here
    } else if (settings.last_reading != nullptr && *settings.last_reading) {
      for (const auto& reading : (*settings.last_reading)->gpus) {
        if (reading.index != use.index) continue;
        gpu.baseline_used = reading.memory.used;
        for (const auto& p : reading.processes) {
          if (std::find(use.job_pids.begin(), use.job_pids.end(), static_cast<pid_t>(p.pid)) == use.job_pids.end()) {
            gpu.others_listed_bytes += p.used_memory.value_or(0);
          }
        }
      }
    }
    for (pid_t pid : use.job_pids) {
      if (std::none_of(plan.targets.begin(), plan.targets.end(), [pid](const PlannedTarget& t) { return t.pid == pid; })) {
        PlannedTarget target;
        target.pid = pid;
        target.present = true;
        plan.targets.push_back(target);
      }
    }
    plan.gpus.push_back(gpu);
  }
  const bool survivor = report.left_behind();
  VerifyOptions options;
  options.timeout = survivor ? std::chrono::milliseconds(0) : settings.verify_timeout;
  for (const auto& t : report.ended) {
    if (t.outcome == KillOutcome::Survived && t.signals.empty()) options.left_on_purpose.insert(t.pid);
  }
  report.verification = verify_release(
      plan, [&source]() { return source.read_driver_only(); }, [&source]() { return source.take(); }, options);
  if (const auto after = source.read_driver_only()) {
    for (auto& use : report.gpus) {
      for (const auto& reading : after->gpus) {
        if (reading.index == use.index) use.used_after_bytes = reading.memory.used;
      }
    }
  }
  report.verify_seconds = std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

ProcessEvidence describe_member(const EndingSettings& settings, const JobMember& member, std::string& evidence_dir) {
  ProcessEvidence evidence;
  evidence.pid = member.stat.pid;
  evidence.comm = member.stat.comm;
  evidence.state = member.stat.state;
  evidence.wchan = procfs::read_wchan(settings.proc_root, member.stat.pid);
  evidence.kernel_stack = procfs::read_kernel_stack(settings.proc_root, member.stat.pid).value_or("");
  const long ticks = sysconf(_SC_CLK_TCK);
  evidence.cpu_seconds = static_cast<double>(member.stat.utime_ticks + member.stat.stime_ticks) /
                         static_cast<double>(ticks > 0 ? ticks : 100);
  evidence.gpus = member.gpu_minors;
  if (auto it = settings.sm_util.find(member.stat.pid); it != settings.sm_util.end()) evidence.sm_util_percent = it->second;
  if (settings.dump && !evidence_dir.empty()) {
    DumpSettings dump;
    dump.directory = evidence_dir;
    dump.proc_root = settings.proc_root;
    dump_process(dump, exe_basename(settings.proc_root, member.stat.pid), !member.gpu_minors.empty(),
                 member.stat.start_time_ticks, evidence);
  }
  return evidence;
}

void end_job(const EndingSettings& settings, RunReport& report) {
  const auto start = Clock::now();
  std::string evidence_dir = settings.evidence_dir;
  auto describe_all = [&](const Members& members) {
    if (settings.dump && report.evidence_dir.empty()) {
      if (ensure_evidence_dir(evidence_dir, report.notes)) report.evidence_dir = evidence_dir;
    }
    std::string dir = report.evidence_dir;
    for (const auto& [pid, member] : members) report.evidence.push_back(describe_member(settings, member, dir));
  };

  const Members left = list_members(settings.membership);
  if (!left.empty()) {
    if (settings.collect_all_evidence) describe_all(left);
    const std::string reason = report.end == JobEnd::Hung      ? "the job hung (--hang-timeout)"
                               : report.end == JobEnd::FailFast ? "a process of the job failed (--fail-fast)"
                                                                : "left running when the job's main command exited";
    const std::set<pid_t> spared = end_mps_clients(settings, left, report);
    merge(report.ended, signal_members(settings, left, SIGTERM, settings.kill_timeout, reason, spared, report.ended),
          false);
    if (settings.reap) settings.reap();
    if (settings.look) settings.look();
    const Members stubborn = list_members(settings.membership);
    Members to_kill = stubborn;
    for (pid_t pid : spared) to_kill.erase(pid);
    if (!to_kill.empty()) {
      if (!settings.collect_all_evidence) describe_all(to_kill);
      merge(report.ended,
            signal_members(settings, stubborn, SIGKILL, kKillGrace,
                           "did not exit within --kill-timeout after SIGTERM", spared, report.ended),
            true);
      if (settings.reap) settings.reap();
    }
  }
  report.ending_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  verify(settings, report);
}

}  // namespace gpureap::job
