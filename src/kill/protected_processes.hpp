// Processes gpureap never signals unless --force: display servers, the driver's own daemons and
// monitoring tools. Killing them takes down a desktop or a node's monitoring and frees nothing
// that matters. Matched on comm and on the basename of exe, exactly or with a trailing '*'.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "proc/process_info.hpp"

namespace gpureap {

class ProtectedProcesses {
 public:
  // The built-in list: Xorg, Xwayland, gnome-shell, kwin_x11, kwin_wayland, sway,
  // nvidia-persistenced, nv-hostengine, dcgm*, nvidia-smi.
  static ProtectedProcesses builtin();

  void add(std::string pattern) { patterns_.push_back(std::move(pattern)); }
  const std::vector<std::string>& patterns() const { return patterns_; }

  // The pattern that protects this process, if any.
  std::optional<std::string> match(const ProcessInfo& process) const;

 private:
  std::vector<std::string> patterns_;
};

// True when `name` matches `pattern` (exact, or a prefix when the pattern ends with '*').
bool protected_name_matches(const std::string& pattern, const std::string& name);

}  // namespace gpureap
