// Which processes `gpureap kill` acts on, chosen from ONE snapshot, each with the reason it
// was chosen. Policy (what must never be signalled) is applied afterwards, in kill_plan.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>
#include <unistd.h>

#include "snapshot/snapshot.hpp"

namespace gpureap {

struct SelectionCriteria {
  std::vector<pid_t> pids;                // named on the command line: selected whatever they are
  // Filters over the GPU processes the driver lists (combined with AND). Any of them, or
  // --holders/--all, selects GPU processes in addition to the named PIDs.
  std::vector<unsigned> gpus;             // NVIDIA GPUs, by NVML index
  std::vector<std::string> drm_gpus;      // AMD and Intel GPUs, by PCI address (their ROCm jobs)
  std::vector<std::string> users;         // names or numeric uids
  std::string name_regex;                 // RE2 syntax, searched in the command line (command_pattern.hpp)
  std::vector<std::string> containers;    // id or pod-UID prefixes
  // Whose --container it is (container_selected_by): another user's rootless container never
  // satisfies it.
  uid_t container_selector = ::getuid();
  bool holders = false;                   // also unlisted holders of the GPUs' device files
  bool all = false;                       // every GPU process
  bool tree = true;                       // add descendants holding GPU files or in the same group
  bool group = false;                     // add every member of each target's process group
  std::string named_reason = "named on the command line";  // how a named PID came to be chosen (top: "chosen in the view")

  bool gpu_filter() const { return !gpus.empty() || !drm_gpus.empty(); }
  bool has_filters() const {
    return !gpus.empty() || !drm_gpus.empty() || !users.empty() || !name_regex.empty() || !containers.empty() || holders || all;
  }
};

struct SelectedProcess {
  pid_t pid = 0;
  std::string reason;          // why, in words: "named on the command line", "worker of 1234 ..."
  std::optional<pid_t> via;    // the target it was added for (tree or group expansion)
  bool present = true;         // exists in this PID namespace (false: only the driver lists it)
  bool by_tree = false;        // added as a descendant
  bool by_group = false;       // added as a process-group member
};

struct Selection {
  std::vector<SelectedProcess> processes;  // in selection order, each PID once
  std::vector<pid_t> missing;              // named PIDs that neither /proc nor the driver knows
};

// Throws std::invalid_argument, with one line saying why, for an invalid or too long --name.
Selection select_targets(const Snapshot& snapshot, const SelectionCriteria& criteria);

}  // namespace gpureap
