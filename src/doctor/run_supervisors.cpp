// Jobs of `gpureap run` whose supervisor is gone (SIGKILLed, or its machine's OOM killer): the
// job's cgroup gpureap-run.<pid> is left with whatever ran in it, and nothing will end it. The
// supervisor stays in the cgroup it created its job's below, so a PID that is alive but no
// longer a gpureap in that cgroup is not the supervisor (its PID was reused).
#include <dirent.h>

#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "doctor/doctor.hpp"
#include "kill/cgroup_kill.hpp"
#include "proc/pid_files.hpp"

namespace gpureap {
namespace {

constexpr std::string_view kJobPrefix = "gpureap-run.";
// A host's cgroup tree is walked this deep and this wide at most: a delegated user may make it
// as large as they like.
constexpr int kMaxDepth = 16;
constexpr std::size_t kMaxDirectories = 20000;

struct JobCgroupFound {
  std::string relative;  // below the mount, "/..." (what `reap --cgroup` takes)
  pid_t supervisor = 0;
};

std::optional<pid_t> supervisor_pid(const char* name) {
  if (std::strncmp(name, kJobPrefix.data(), kJobPrefix.size()) != 0) return std::nullopt;
  const char* digits = name + kJobPrefix.size();
  if (*digits == '\0' || std::strlen(digits) > 9) return std::nullopt;
  long pid = 0;
  for (const char* c = digits; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') return std::nullopt;
    pid = pid * 10 + (*c - '0');
  }
  if (pid <= 0) return std::nullopt;
  return static_cast<pid_t>(pid);
}

void find_job_cgroups(const std::string& mount, const std::string& relative, int depth, std::size_t& visited,
                      std::vector<JobCgroupFound>& found) {
  if (depth > kMaxDepth || ++visited > kMaxDirectories) return;
  DIR* dir = opendir((mount + relative).c_str());
  if (dir == nullptr) return;
  std::vector<std::string> children;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_type != DT_DIR || std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) {
      continue;
    }
    const std::string child = relative + "/" + entry->d_name;
    if (auto pid = supervisor_pid(entry->d_name)) {
      found.push_back({child, *pid});
      continue;  // what the job made below its cgroup is the job's
    }
    children.push_back(child);
  }
  closedir(dir);
  for (const auto& child : children) find_job_cgroups(mount, child, depth + 1, visited, found);
}

bool supervisor_alive(const std::string& proc_root, const Snapshot& snapshot, const JobCgroupFound& job) {
  const ProcessInfo* process = snapshot.table.find(job.supervisor);
  if (process == nullptr || process->state == 'Z' || process->comm != "gpureap") return false;
  const auto cgroup = procfs::read_cgroup_v2_path(proc_root, job.supervisor);
  const std::string parent = job.relative.substr(0, job.relative.rfind('/'));
  return cgroup && (*cgroup == parent || (*cgroup == "/" && parent.empty()));
}

}  // namespace

void check_run_supervisors(const Snapshot& snapshot, const DoctorOptions& options, Diagnosis& diagnosis) {
  const auto mount = cgroupfs::cgroup2_mount(options.proc_root);
  if (!mount) return;
  std::vector<JobCgroupFound> found;
  std::size_t visited = 0;
  find_job_cgroups(*mount, "", 0, visited, found);
  if (visited > kMaxDirectories) {
    diagnosis.notes.push_back(fmt::format("the cgroup tree has more than {} cgroups: jobs of `gpureap run` whose "
                                          "supervisor is gone were looked for among the first {} only",
                                          kMaxDirectories, kMaxDirectories));
  }
  for (const auto& job : found) {
    if (supervisor_alive(options.proc_root, snapshot, job)) continue;
    const std::vector<pid_t> members = cgroupfs::cgroup_subtree_pids(*mount + job.relative);
    const std::string name = job.relative.substr(job.relative.rfind('/') + 1);
    Finding f;
    f.id = FindingId::RunSupervisorGone;
    // The job may still be doing its work unguarded: a notice, not a fault of the host (and a
    // job whose memory is left is a memory finding of its own).
    f.severity = Severity::Info;
    f.summary = members.empty()
                    ? fmt::format("{}: its supervisor is gone; its empty cgroup {} is left", name, job.relative)
                    : fmt::format("{}: its supervisor is gone; {} process{} of its job still run{} in {}", name,
                                  members.size(), members.size() == 1 ? "" : "es", members.size() == 1 ? "s" : "",
                                  job.relative);
    f.details.push_back(fmt::format(
        "`gpureap run` (PID {}) made this cgroup for its job and no longer runs: it was killed before it could end "
        "the job, and nothing else will.",
        job.supervisor));
    f.evidence["cgroup"] = job.relative;
    f.evidence["supervisor_pid"] = job.supervisor;
    f.evidence["pids"] = members;
    for (pid_t pid : members) {
      if (const ProcessInfo* p = snapshot.table.find(pid)) f.details.push_back(fmt::format("  PID {} ({})", pid, p->comm));
    }
    if (members.empty()) {
      f.remedies.push_back({fmt::format("rmdir {}{}", *mount, job.relative), Risk::None,
                            "remove the empty cgroup (nothing runs in it)", false});
    } else {
      f.remedies.push_back({fmt::format("gpureap reap --cgroup {}", job.relative), Risk::Medium,
                            "end every process in the job's cgroup (the cgroup proves they are the job's) and verify "
                            "the GPU memory they held is released",
                            false});
    }
    diagnosis.findings.push_back(std::move(f));
  }
}

}  // namespace gpureap
