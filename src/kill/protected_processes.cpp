#include "kill/protected_processes.hpp"

namespace gpureap {

ProtectedProcesses ProtectedProcesses::builtin() {
  ProtectedProcesses list;
  list.builtin_patterns_ = {"Xorg", "Xwayland", "gnome-shell", "kwin_x11", "kwin_wayland", "sway",
                            "nvidia-persistenced", "nv-hostengine", "dcgm*", "nvidia-smi"};
  return list;
}

bool protected_name_matches(const std::string& pattern, const std::string& name) {
  if (pattern.empty() || name.empty()) return false;
  if (pattern.back() == '*') return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return pattern == name;
}

std::optional<std::string> ProtectedProcesses::match(const ProcessInfo& process) const {
  const std::string exe_base = executable_basename(process.exe);
  // Only root can start a root-owned process from a file: the exe link and the owner together
  // cannot be forged by a user. Without the details (exe unread) nothing built-in matches.
  if (process.details_loaded && process.uid == 0) {
    for (const auto& pattern : builtin_patterns_) {
      if (protected_name_matches(pattern, exe_base)) return pattern;
    }
  }
  for (const auto& pattern : user_patterns_) {
    // comm is cut to 15 characters: a longer name matches on its first 15.
    const std::string short_pattern =
        pattern.back() != '*' && pattern.size() > 15 ? pattern.substr(0, 15) : pattern;
    if (protected_name_matches(short_pattern, process.comm) || protected_name_matches(pattern, exe_base)) {
      return pattern;
    }
  }
  return std::nullopt;
}

}  // namespace gpureap
