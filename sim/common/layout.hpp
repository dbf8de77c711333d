// Where everything lives inside a simulator state directory (GPUSIM_STATE_DIR).
//
//   config.json            GPUs and faults; replaced atomically by `gpusim`
//   dev/                   simulated device files (regular files) that CUDA programs hold open
//   allocs/<id>.json       one record per context allocation
//   allocs/<id>.hold       flock(LOCK_SH) by every process sharing the context's descriptor
//   allocs/<id>.owner      POSIX write lock by the owning process only
//   allocs/<id>.released   release stamp (CLOCK_REALTIME ns), written once on first observation
//   allocs/.lock           serialises allocations so that capacity checks are exact
#pragma once

#include <optional>
#include <string>

namespace gpusim {

inline constexpr const char* kStateDirEnv = "GPUSIM_STATE_DIR";

class Layout {
 public:
  explicit Layout(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  std::string config() const { return root_ + "/config.json"; }
  std::string dev_dir() const { return root_ + "/dev"; }
  std::string dev(const std::string& name) const { return dev_dir() + "/" + name; }
  std::string gpu_dev(unsigned minor) const { return dev("nvidia" + std::to_string(minor)); }
  std::string caps_dir() const { return dev_dir() + "/nvidia-caps"; }
  std::string cap_dev(unsigned minor) const {
    return caps_dir() + "/nvidia-cap" + std::to_string(minor);
  }
  std::string allocs_dir() const { return root_ + "/allocs"; }
  std::string alloc_json(const std::string& id) const { return allocs_dir() + "/" + id + ".json"; }
  std::string alloc_hold(const std::string& id) const { return allocs_dir() + "/" + id + ".hold"; }
  std::string alloc_owner(const std::string& id) const { return allocs_dir() + "/" + id + ".owner"; }
  std::string alloc_released(const std::string& id) const {
    return allocs_dir() + "/" + id + ".released";
  }
  std::string alloc_lock() const { return allocs_dir() + "/.lock"; }

 private:
  std::string root_;
};

// The state directory named by GPUSIM_STATE_DIR, if set and non-empty.
std::optional<std::string> state_dir_from_env();

}  // namespace gpusim
