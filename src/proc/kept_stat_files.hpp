// The stat files of processes read again at every look (watch's followed processes and exit
// sentinels, each second): each is kept open and read again with one pread, where a read by
// path opens /proc/<pid> and its stat and closes both (five system calls, two path lookups).
// A kept file stays bound to the process it was opened for: once that process is reaped its
// reads fail (ESRCH), even when the PID names another process by then; the start time is
// checked at every read as well. At most `max_open` files are kept, so that a host with many
// GPU processes does not spend the descriptor limit: beyond it, processes are read by path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include <sys/types.h>

#include "proc/proc_io.hpp"
#include "proc/process_info.hpp"

namespace gpureap::procfs {

class KeptStatFiles {
 public:
  explicit KeptStatFiles(std::string proc_root, std::size_t max_open = 256);

  // The stat of the process `pid` that started at start_time_ticks; nullopt once it is gone
  // (reaped) or its PID names another process.
  std::optional<StatFields> read(pid_t pid, std::uint64_t start_time_ticks);
  // Closes the files of the processes not read since the last call.
  void close_unread();
  std::size_t kept() const { return kept_.size(); }

 private:
  struct Kept {
    unique_fd file;
    std::uint64_t start_time_ticks = 0;
    bool read = false;
  };
  std::optional<StatFields> read_file(int fd, pid_t pid, std::uint64_t start_time_ticks);

  std::string proc_root_;
  std::size_t max_open_;
  std::unordered_map<pid_t, Kept> kept_;
};

}  // namespace gpureap::procfs
