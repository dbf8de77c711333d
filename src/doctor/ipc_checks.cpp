// Shared memory and semaphores left by processes that are gone: System V segments and
// semaphore sets, and files in /dev/shm. They hold host RAM (often a job's pinned buffers),
// not GPU memory, but they are what `ipcs` hunts are about after a crashed job.
#include <fmt/format.h>

#include "text/human_format.hpp"
#include "doctor/doctor.hpp"
#include "text/shell_quote.hpp"

namespace gpureap {
namespace {

constexpr std::uint64_t kWarnBytes = 1ull << 30;  // below this a leftover is worth a note, not an alarm
constexpr std::size_t kDetailLines = 20;

Finding ipc_finding(std::string id, std::uint64_t bytes, std::size_t count, std::string what) {
  Finding f;
  f.id = std::move(id);
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

}  // namespace

void check_ipc(const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis) {
  IpcScanOptions scan;
  scan.proc_root = snapshot.table.options().proc_root;
  scan.shm_dir = options.shm_dir;
  scan.min_age_seconds = options.ipc_min_age_seconds;
  diagnosis.ipc = find_ipc_leftovers(scan);
  const IpcLeftovers& ipc = diagnosis.ipc;
  for (const auto& e : ipc.errors) diagnosis.notes.push_back("leftover IPC: " + e);

  if (!ipc.shm.empty()) {
    std::uint64_t bytes = 0;
    nlohmann::json list = nlohmann::json::array();
    std::string command = "ipcrm";
    for (const auto& s : ipc.shm) bytes += s.rss_bytes.value_or(s.size_bytes);
    Finding f = ipc_finding("leftover-sysv-shm", bytes, ipc.shm.size(), "System V shared memory segment(s) left by processes that are gone");
    for (std::size_t i = 0; i < ipc.shm.size(); ++i) {
      const auto& s = ipc.shm[i];
      list.push_back({{"shmid", s.shmid}, {"key", s.key}, {"size_bytes", s.size_bytes},
                      {"rss_bytes", s.rss_bytes ? nlohmann::json(*s.rss_bytes) : nlohmann::json(nullptr)},
                      {"creator_pid", s.creator_pid}, {"last_pid", s.last_pid}, {"attached", s.attached},
                      {"uid", s.uid}, {"ctime", s.ctime}});
      add_detail(f, i, fmt::format("shmid {} key {:#x} {} created by PID {} (gone), uid {}", s.shmid,
                                   static_cast<unsigned>(s.key), format_bytes(s.size_bytes), s.creator_pid, s.uid));
      command += " -m " + std::to_string(s.shmid);
      FixAction fix;
      fix.kind = FixAction::Kind::RemoveSysvShm;
      fix.finding_id = f.id;
      fix.ipc_index = i;
      fix.description = fmt::format("remove System V segment {} ({})", s.shmid, format_bytes(s.size_bytes));
      diagnosis.fixes.push_back(std::move(fix));
    }
    f.evidence["segments"] = list;
    f.evidence["total_bytes"] = bytes;
    f.remedies.push_back({"ipcs -m -p", Risk::None, "see creators and last users of every segment"});
    f.remedies.push_back({command, Risk::Low, "remove them (nobody is attached and their creators are gone)", true});
    diagnosis.findings.push_back(std::move(f));
  }

  if (!ipc.semaphores.empty()) {
    nlohmann::json list = nlohmann::json::array();
    std::string command = "ipcrm";
    Finding f = ipc_finding("leftover-sysv-sem", 0, ipc.semaphores.size(), "System V semaphore set(s) last used by processes that are gone");
    for (std::size_t i = 0; i < ipc.semaphores.size(); ++i) {
      const auto& s = ipc.semaphores[i];
      list.push_back({{"semid", s.semid}, {"key", s.key}, {"nsems", s.nsems}, {"last_pids", s.last_pids},
                      {"uid", s.uid}, {"ctime", s.ctime}, {"otime", s.otime}});
      std::string pids;
      for (int pid : s.last_pids) pids += (pids.empty() ? "" : ", ") + std::to_string(pid);
      add_detail(f, i, fmt::format("semid {} key {:#x}, {} semaphore(s), last used by PID {} (gone)", s.semid,
                                   static_cast<unsigned>(s.key), s.nsems, pids));
      command += " -s " + std::to_string(s.semid);
      FixAction fix;
      fix.kind = FixAction::Kind::RemoveSysvSem;
      fix.finding_id = f.id;
      fix.ipc_index = i;
      fix.description = fmt::format("remove System V semaphore set {}", s.semid);
      diagnosis.fixes.push_back(std::move(fix));
    }
    f.evidence["semaphore_sets"] = list;
    f.remedies.push_back({"ipcs -s", Risk::None, "list every semaphore set"});
    f.remedies.push_back({command, Risk::Low, "remove them (every process that used them is gone)", true});
    diagnosis.findings.push_back(std::move(f));
  }

  if (!ipc.posix.empty()) {
    std::uint64_t bytes = 0;
    for (const auto& p : ipc.posix) bytes += p.allocated_bytes;
    nlohmann::json list = nlohmann::json::array();
    std::string command = "rm --";
    Finding f = ipc_finding("leftover-posix-shm", bytes, ipc.posix.size(),
                            "file(s) in " + options.shm_dir + " that no process has open or mapped");
    for (std::size_t i = 0; i < ipc.posix.size(); ++i) {
      const auto& p = ipc.posix[i];
      list.push_back({{"path", p.path}, {"size_bytes", p.size_bytes}, {"allocated_bytes", p.allocated_bytes},
                      {"uid", p.uid}, {"mtime", p.mtime}, {"semaphore", p.semaphore},
                      {"creator_pid", p.creator_pid ? nlohmann::json(*p.creator_pid) : nlohmann::json(nullptr)}});
      add_detail(f, i, fmt::format("{} {}{}, uid {}", p.path, format_bytes(p.allocated_bytes),
                                   p.creator_pid ? fmt::format(", created by PID {} (gone)", *p.creator_pid) : std::string(),
                                   p.uid));
      command += " " + shell_quote(p.path);
      FixAction fix;
      fix.kind = FixAction::Kind::RemovePosixShm;
      fix.finding_id = f.id;
      fix.ipc_index = i;
      fix.description = fmt::format("remove {} ({})", p.path, format_bytes(p.allocated_bytes));
      diagnosis.fixes.push_back(std::move(fix));
    }
    if (ipc.processes_not_inspected > 0) {
      f.details.push_back(fmt::format("{} process(es) could not be inspected: one of them may still use these files "
                                      "(run as root to be sure)",
                                      ipc.processes_not_inspected));
    }
    f.evidence["files"] = list;
    f.evidence["total_bytes"] = bytes;
    f.evidence["processes_not_inspected"] = ipc.processes_not_inspected;
    f.remedies.push_back({"ls -la " + shell_quote(options.shm_dir), Risk::None, "look at them"});
    f.remedies.push_back({command, Risk::Low, "remove them (no process has them open or mapped)", true});
    diagnosis.findings.push_back(std::move(f));
  }
}

}  // namespace gpureap
