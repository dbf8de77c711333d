// The pipe directory the MPS front end is pointed at: a directory of root's made for one
// terminate, holding hard links to the very sockets the proven control daemon listens on.
//
// NVIDIA's control daemon makes its pipe directory mode 0777 (R535 and R550 alike), so any
// user can replace `control` between the proof and the front end's connect, and answer the
// front end in the daemon's place. Hard links made into a directory only root can change, each
// checked to be the daemon's own socket file after it was made, cannot be swapped: the front
// end can then reach the daemon and nothing else.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "proc/proc_io.hpp"
#include "proc/unix_sockets.hpp"

namespace gpureap {

class PrivatePipeDirectory {
 public:
  // Beside the pipe directory `bound_dir` (absolute, as the daemon bound its sockets there),
  // reached from here under `root_here` ("/" or the daemon's /proc/<pid>/root): the links need
  // its filesystem. Made only where no other user can change the path: every directory from
  // the root down is root's and not writable by others unless sticky. `daemon_sockets` are the
  // daemon's socket inodes; `table` says which listen at <bound_dir>/control and
  // <bound_dir>/control_privileged. nullopt with the reason in `why`.
  static std::optional<PrivatePipeDirectory> make(const std::string& root_here, const std::string& bound_dir,
                                                  const std::set<std::uint64_t>& daemon_sockets,
                                                  const procfs::UnixSocketTable& table, std::string& why);
  PrivatePipeDirectory(PrivatePipeDirectory&& other) noexcept;
  PrivatePipeDirectory& operator=(PrivatePipeDirectory&& other) noexcept;
  PrivatePipeDirectory(const PrivatePipeDirectory&) = delete;
  PrivatePipeDirectory& operator=(const PrivatePipeDirectory&) = delete;
  ~PrivatePipeDirectory();

  const std::string& path() const { return path_; }

 private:
  PrivatePipeDirectory() = default;
  procfs::unique_fd parent_;
  procfs::unique_fd dir_;
  std::string name_;
  std::string path_;
  std::set<std::string> links_;
};

}  // namespace gpureap
