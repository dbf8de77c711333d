// Shared memory and semaphores left by processes that are gone: System V segments and
// semaphore sets, and files in /dev/shm. They hold host RAM (often a job's pinned buffers),
// not GPU memory, but they are what `ipcs` hunts are about after a crashed job.
#include <ctime>

#include <fmt/format.h>

#include "text/human_format.hpp"
#include "doctor/doctor.hpp"
#include "text/shell_quote.hpp"

namespace gpureap {
namespace {

constexpr std::uint64_t kWarnBytes = 1ull << 30;  // below this a leftover is worth a note, not an alarm
constexpr std::size_t kDetailLines = 20;

// --fix removes a file unasked only when it is recognisably a dead GPU job's and old.
enum class PosixRemovability { DeadGpuJob, UnknownOrigin, TooRecent };

PosixRemovability posix_removability(const PosixShmLeftover& p, std::int64_t now, double min_age_seconds) {
  if (!p.creator_pid) return PosixRemovability::UnknownOrigin;
  if (static_cast<double>(now - p.mtime) < min_age_seconds) return PosixRemovability::TooRecent;
  return PosixRemovability::DeadGpuJob;
}

std::string posix_removability_text(PosixRemovability why, const PosixShmLeftover& p, double min_age_seconds) {
  switch (why) {
    case PosixRemovability::DeadGpuJob:
      return fmt::format("PyTorch shared memory of PID {}, which is gone (--fix removes it)", *p.creator_pid);
    case PosixRemovability::TooRecent:
      return fmt::format("PyTorch shared memory of PID {}, which is gone, but written less than {} ago "
                         "(removed only with --only leftover-posix-shm)",
                         *p.creator_pid, format_duration(min_age_seconds));
    case PosixRemovability::UnknownOrigin: break;
  }
  return "not recognisably a GPU job's (removed only with --only leftover-posix-shm)";
}

Finding ipc_finding(FindingId id, std::uint64_t bytes, std::size_t count, std::string what) {
  Finding f;
  f.id = id;
  f.severity = bytes >= kWarnBytes ? Severity::Warning : Severity::Info;
  f.summary = fmt::format("{} {}{}", count, what,
                          bytes > 0 ? fmt::format(", holding {} of RAM", format_bytes(bytes)) : std::string());
  return f;
}

void add_detail(Finding& f, std::size_t index, std::string line) {
  if (index < kDetailLines) {
    f.details.push_back(std::move(line));
  } else if (index == kDetailLines) {
    f.details.push_back("... (the evidence lists all of them)");
  }
}

// The fix that removes the `index`th leftover of a finding.
void add_removal(Diagnosis& diagnosis, FixAction::Kind kind, FindingId id, std::size_t index, bool only_when_chosen,
                 std::string description) {
  FixAction fix;
  fix.kind = kind;
  fix.finding_id = id;
  fix.ipc_index = index;
  fix.only_when_chosen = only_when_chosen;
  fix.description = std::move(description);
  diagnosis.fixes.push_back(std::move(fix));
}

// System V segments: each a fix only when chosen, since no name ties one to a GPU job.
void report_sysv_shm(const IpcLeftovers& ipc, Diagnosis& diagnosis) {
  std::uint64_t bytes = 0;
  EvidenceList list;
  std::string command = "ipcrm";
  for (const auto& s : ipc.shm) bytes += s.rss_bytes.value_or(s.size_bytes);
  Finding f = ipc_finding(FindingId::LeftoverSysvShm, bytes, ipc.shm.size(), "System V shared memory segment(s) left by processes that are gone");
  for (std::size_t i = 0; i < ipc.shm.size(); ++i) {
    const auto& s = ipc.shm[i];
    list.push_back(Evidence{{"shmid", s.shmid}, {"key", s.key}, {"size_bytes", s.size_bytes},
                    {"rss_bytes", EvidenceValue(s.rss_bytes)},
                    {"creator_pid", s.creator_pid}, {"last_pid", s.last_pid}, {"attached", s.attached},
                    {"uid", s.uid}, {"ctime", s.ctime}});
    add_detail(f, i, fmt::format("shmid {} key {:#x} {} created by PID {} (gone), uid {}", s.shmid,
                                 static_cast<unsigned>(s.key), format_bytes(s.size_bytes), s.creator_pid, s.uid));
    command += " -m " + std::to_string(s.shmid);
    // No name ties a System V object to a GPU job: removed only when chosen.
    add_removal(diagnosis, FixAction::Kind::RemoveSysvShm, f.id, i, true,
                fmt::format("remove System V segment {} ({})", s.shmid, format_bytes(s.size_bytes)));
  }
  f.evidence["segments"] = list;
  f.evidence["total_bytes"] = bytes;
  f.remedies.push_back({"ipcs -m -p", Risk::None, "see creators and last users of every segment"});
  f.details.push_back("Nothing ties a System V segment to a GPU job: --fix removes them only when chosen with "
                      "--only leftover-sysv-shm.");
  f.remedies.push_back({command, Risk::Low, "remove them (nobody is attached and their creators are gone)", false});
  diagnosis.findings.push_back(std::move(f));
}

// System V semaphore sets: like segments, fixes only when chosen.
void report_sysv_semaphores(const IpcLeftovers& ipc, Diagnosis& diagnosis) {
  EvidenceList list;
  std::string command = "ipcrm";
  Finding f = ipc_finding(FindingId::LeftoverSysvSem, 0, ipc.semaphores.size(), "System V semaphore set(s) last used by processes that are gone");
  for (std::size_t i = 0; i < ipc.semaphores.size(); ++i) {
    const auto& s = ipc.semaphores[i];
    list.push_back(Evidence{{"semid", s.semid}, {"key", s.key}, {"nsems", s.nsems}, {"last_pids", s.last_pids},
                    {"uid", s.uid}, {"ctime", s.ctime}, {"otime", s.otime}});
    std::string pids;
    for (int pid : s.last_pids) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
    add_detail(f, i, fmt::format("semid {} key {:#x}, {} semaphore(s), last used by PID {} (gone)", s.semid,
                                 static_cast<unsigned>(s.key), s.nsems, pids));
    command += " -s " + std::to_string(s.semid);
    add_removal(diagnosis, FixAction::Kind::RemoveSysvSem, f.id, i, true,
                fmt::format("remove System V semaphore set {}", s.semid));
  }
  f.evidence["semaphore_sets"] = list;
  f.remedies.push_back({"ipcs -s", Risk::None, "list every semaphore set"});
  f.details.push_back("Nothing ties a System V semaphore set to a GPU job: --fix removes them only when chosen "
                      "with --only leftover-sysv-sem.");
  f.remedies.push_back({command, Risk::Low, "remove them (every process that used them is gone)", false});
  diagnosis.findings.push_back(std::move(f));
}

// Files in the shm directory: a dead PyTorch job's old file is a fix unasked, any other only when chosen.
void report_posix_shm(const IpcLeftovers& ipc, const DoctorOptions& options, std::int64_t now,
                      Diagnosis& diagnosis) {
  std::uint64_t bytes = 0;
  for (const auto& p : ipc.posix) bytes += p.allocated_bytes;
  EvidenceList list;
  std::string command = "rm --";
  Finding f = ipc_finding(FindingId::LeftoverPosixShm, bytes, ipc.posix.size(),
                          "file(s) in " + options.shm_dir + " that no process has open or mapped");
  std::size_t unasked = 0;
  for (std::size_t i = 0; i < ipc.posix.size(); ++i) {
    const auto& p = ipc.posix[i];
    const PosixRemovability why = posix_removability(p, now, options.ipc_min_age_seconds);
    const bool removable = why == PosixRemovability::DeadGpuJob;
    unasked += removable ? 1 : 0;
    list.push_back(Evidence{{"path", p.path}, {"size_bytes", p.size_bytes}, {"allocated_bytes", p.allocated_bytes},
                    {"uid", p.uid}, {"mtime", p.mtime}, {"age_seconds", now - p.mtime}, {"semaphore", p.semaphore},
                    {"creator_pid", EvidenceValue(p.creator_pid)},
                    {"origin", p.creator_pid ? "pytorch" : "unknown"},
                    {"removed_by_fix", removable}});
    add_detail(f, i, fmt::format("{} {}, uid {}, last written {} ago: {}", p.path, format_bytes(p.allocated_bytes),
                                 p.uid, format_duration(static_cast<double>(now - p.mtime)),
                                 posix_removability_text(why, p, options.ipc_min_age_seconds)));
    command += " " + shell_quote(p.path);
    add_removal(diagnosis, FixAction::Kind::RemovePosixShm, f.id, i, !removable,
                fmt::format("remove {} ({})", p.path, format_bytes(p.allocated_bytes)));
  }
  if (ipc.processes_not_inspected > 0) {
    f.details.push_back(fmt::format("{} process(es) could not be inspected: one of them may still use these files "
                                    "(run as root to be sure)",
                                    ipc.processes_not_inspected));
  }
  f.evidence["files"] = list;
  f.evidence["total_bytes"] = bytes;
  f.evidence["processes_not_inspected"] = ipc.processes_not_inspected;
  f.evidence["blocked_pids"] = ipc.blocked_pids;
  f.evidence["min_age_seconds"] = options.ipc_min_age_seconds;
  f.remedies.push_back({"ls -la " + shell_quote(options.shm_dir), Risk::None, "look at them"});
  f.remedies.push_back({command, Risk::Low,
                        unasked == ipc.posix.size()
                            ? "remove them (a dead PyTorch job's; no process has them open or mapped)"
                            : "remove them once you know whose they are (no process has them open or mapped); "
                              "--fix takes only a dead PyTorch job's old files unless chosen with --only "
                              "leftover-posix-shm",
                        unasked > 0});
  diagnosis.findings.push_back(std::move(f));
}

}  // namespace

void check_ipc(const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis) {
  IpcScanOptions scan;
  scan.proc_root = snapshot.table.options().proc_root;
  scan.shm_dir = options.shm_dir;
  scan.min_age_seconds = 0;  // report everything unused; the age decides only what --fix takes unasked
  diagnosis.ipc = find_ipc_leftovers(scan);
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  const IpcLeftovers& ipc = diagnosis.ipc;
  for (const auto& e : ipc.errors) diagnosis.notes.push_back("leftover IPC: " + e);
  if (!ipc.shm.empty()) report_sysv_shm(ipc, diagnosis);
  if (!ipc.semaphores.empty()) report_sysv_semaphores(ipc, diagnosis);
  if (!ipc.posix.empty()) report_posix_shm(ipc, options, now, diagnosis);
}

}  // namespace gpureap
