#include "common/gpu_reset.hpp"

#include <unistd.h>

#include <cctype>
#include <climits>
#include <cstdlib>

#include "common/alloc_scan.hpp"
#include "common/clock.hpp"
#include "common/file_io.hpp"

namespace gpusim {

static bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::set<unsigned> device_holders(const std::string& path) {
  std::set<unsigned> pids;
  char resolved[PATH_MAX];
  if (::realpath(path.c_str(), resolved) == nullptr) return pids;
  auto procs = list_dir("/proc");
  if (!procs.ok()) return pids;
  for (const auto& p : *procs) {
    if (!all_digits(p)) continue;
    std::string fd_dir = "/proc/" + p + "/fd";
    auto fds = list_dir(fd_dir);
    if (!fds.ok()) continue;  // gone, or another user's process we may not inspect
    for (const auto& fd : *fds) {
      char target[PATH_MAX];
      ssize_t n = ::readlink((fd_dir + "/" + fd).c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (path == target || std::string(resolved) == target) {
        pids.insert(static_cast<unsigned>(std::strtoul(p.c_str(), nullptr, 10)));
        break;
      }
    }
  }
  return pids;
}

Result<unsigned> drop_allocations(const Layout& layout, const Config& config,
                                  std::optional<unsigned> gpu) {
  auto views = scan_allocations(layout, config, realtime_ns());
  if (!views.ok()) return Error{views.error().message};
  unsigned n = 0;
  for (const auto& v : *views) {
    if (v.state == AllocState::Released || (gpu && v.rec.gpu != *gpu)) continue;
    delete_allocation_files(layout, v.rec.id);
    ++n;
  }
  // Stale stamps and temp files of contexts that vanished mid-scan.
  if (!gpu) {
    auto names = list_dir(layout.allocs_dir());
    if (names.ok()) {
      for (const auto& name : *names) {
        if (name != ".lock") ::unlink((layout.allocs_dir() + "/" + name).c_str());
      }
    }
  }
  return n;
}

}  // namespace gpusim
