#include "watch/exit_sentinels.hpp"

#include <unordered_set>

namespace gpureap {

std::vector<ExitSentinel> exit_sentinels(const Snapshot& snapshot, std::size_t limit) {
  std::vector<ExitSentinel> out;
  std::unordered_set<pid_t> seen;
  const auto add = [&](pid_t pid) {
    // PID 0: a leader outside this PID namespace, never evidence (snapshot.cpp's leader_gone).
    if (pid <= 0 || out.size() >= limit || !seen.insert(pid).second) return;
    const ProcessInfo* process = snapshot.table.find(pid);
    if (process == nullptr || process->state == 'Z' || process->kernel_thread) return;
    out.emplace_back(pid, process->start_time_ticks);
  };
  for (const HolderView& h : snapshot.holders) {
    if (h.role != HolderRole::Worker && h.role != HolderRole::Unlisted) continue;
    if (h.linux_process->pgid != h.pid) add(h.linux_process->pgid);
    if (h.linux_process->session != h.pid) add(h.linux_process->session);
    // Once it ends, a worker is no running job's: an orphan if its leader is already gone.
    if (h.listed_ancestor) add(*h.listed_ancestor);
  }
  std::unordered_set<pid_t> gpu_parents;
  for (const HolderView& h : snapshot.holders) gpu_parents.insert(h.pid);
  for (const GpuProcessView& p : snapshot.processes) {
    if (p.linux_process != nullptr) gpu_parents.insert(p.linux_process->pid);
  }
  for (const auto& [pid, process] : snapshot.table.processes()) {
    if (gpu_parents.count(process.ppid)) add(pid);
  }
  return out;
}

}  // namespace gpureap
