// Processes gpureap never signals unless --force: display servers, the driver's own daemons and
// monitoring tools. Killing them takes down a desktop or a node's monitoring and frees nothing
// that matters.
//
// Protection must not be something any user can claim: the built-in names match the basename
// of the executable (not comm, which any process may set) and only for a process owned by root.
// Names the administrator adds (--protect, the configuration file) match comm too: the
// administrator chose them, and a process they name may have no readable executable.
// Exactly, or as a prefix with a trailing '*'.
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

  // A name the user added: matches comm or the executable's basename, whoever owns it.
  void add(std::string pattern) { user_patterns_.push_back(std::move(pattern)); }
  const std::vector<std::string>& builtin_patterns() const { return builtin_patterns_; }
  const std::vector<std::string>& user_patterns() const { return user_patterns_; }

  // The pattern that protects this process, if any.
  std::optional<std::string> match(const ProcessInfo& process) const;

 private:
  std::vector<std::string> builtin_patterns_;
  std::vector<std::string> user_patterns_;
};

// True when `name` matches `pattern` (exact, or a prefix when the pattern ends with '*').
bool protected_name_matches(const std::string& pattern, const std::string& name);

}  // namespace gpureap
