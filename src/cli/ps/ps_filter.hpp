// The --gpu/--user/--pid/--container selection shared by the table, tree and JSON views.
#pragma once

#include <string>
#include <vector>

#include "snapshot/snapshot.hpp"

namespace gpureap {

struct PsFilter {
  std::vector<unsigned> gpus;             // NVML indices
  std::vector<std::string> users;         // names or numeric uids
  std::vector<pid_t> pids;                // host PIDs
  std::vector<std::string> containers;    // id or pod-UID prefixes

  bool gpu_selected(unsigned index) const;
  bool process_selected(const GpuProcessView& process) const;
  bool holder_selected(const HolderView& holder) const;

 private:
  bool linux_selected(pid_t pid, const ProcessInfo* process) const;
};

}  // namespace gpureap
