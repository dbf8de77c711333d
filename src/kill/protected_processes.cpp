#include "kill/protected_processes.hpp"

namespace gpureap {

ProtectedProcesses ProtectedProcesses::builtin() {
  ProtectedProcesses list;
  for (const char* name : {"Xorg", "Xwayland", "gnome-shell", "kwin_x11", "kwin_wayland", "sway",
                           "nvidia-persistenced", "nv-hostengine", "dcgm*", "nvidia-smi"}) {
    list.add(name);
  }
  return list;
}

bool protected_name_matches(const std::string& pattern, const std::string& name) {
  if (pattern.empty() || name.empty()) return false;
  if (pattern.back() == '*') return name.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  return pattern == name;
}

std::optional<std::string> ProtectedProcesses::match(const ProcessInfo& process) const {
  std::string exe_base = process.exe;
  if (const auto slash = exe_base.rfind('/'); slash != std::string::npos) exe_base = exe_base.substr(slash + 1);
  // readlink of a deleted binary ends in " (deleted)".
  if (const auto deleted = exe_base.find(" (deleted)"); deleted != std::string::npos) exe_base.resize(deleted);
  for (const auto& pattern : patterns_) {
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
