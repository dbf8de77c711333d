// The --gpu/--user/--pid/--container selection shared by the table, tree and JSON views.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/common/gpu_choice.hpp"
#include "snapshot/snapshot.hpp"

namespace gpureap {

struct PsFilter {
  std::optional<GpuChoice> gpus;          // --gpu, resolved against the snapshot; nullopt: every GPU
  std::vector<std::string> users;         // names or numeric uids
  std::vector<pid_t> pids;                // host PIDs
  std::vector<std::string> containers;    // id or pod-UID prefixes

  bool gpu_selected(unsigned index) const;
  // An AMD or Intel GPU, by PCI address.
  bool drm_gpu_selected(const std::string& pci) const;
  bool process_selected(const GpuProcessView& process) const;
  bool holder_selected(const HolderView& holder) const;
  // A process holding an AMD or Intel GPU's client, or a KFD context (by --pid, --user,
  // --container); null `process` (not visible here) only when no such filter is given.
  bool linux_selected(pid_t pid, const ProcessInfo* process) const;
  bool linux_filter() const { return !users.empty() || !pids.empty() || !containers.empty(); }
};

}  // namespace gpureap
