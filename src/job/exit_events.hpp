// How a process that is not our child ended: the kernel's process-events connector
// (netlink, NETLINK_CONNECTOR / CN_IDX_PROC) reports every exit with its wait status. It is
// how `run --fail-fast` learns that a rank, whose parent is a launcher and not gpureap, was
// killed by a signal or exited non-zero. Listening needs CAP_NET_ADMIN in the initial user
// and PID namespaces; elsewhere only gpureap's own children and the orphans it reaps are
// seen (their wait statuses).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "proc/proc_io.hpp"

namespace gpureap::job {

struct ProcessExit {
  pid_t pid = 0;        // the process (thread-group leader); threads are left out
  int wait_status = 0;  // as waitpid(2) reports it
};

struct ProcessFork {
  pid_t child = 0;      // a new process: a PID we knew has been reused
};

class ExitEvents {
 public:
  // nullopt with the reason when the connector cannot be used here.
  static std::optional<ExitEvents> open(std::string* why);

  int fd() const { return fd_.get(); }
  // Reads every event queued (non-blocking). `lost` is set when the kernel dropped some
  // (ENOBUFS: the socket buffer overflowed on a busy host).
  void drain(std::vector<ProcessExit>& exits, std::vector<ProcessFork>& forks, bool& lost);

 private:
  ExitEvents() = default;
  procfs::unique_fd fd_;
};

}  // namespace gpureap::job
