// The kernel's process-events connector (netlink, NETLINK_CONNECTOR / CN_IDX_PROC): every
// fork, exec and exit on the host, the exit with its wait status. `run --fail-fast` learns
// from it that a rank, whose parent is a launcher and not gpureap, was killed by a signal or
// exited non-zero; the holder tracker (holder_tracker.hpp) that a holder's child inherited its
// descriptors, or that an exec closed some. Listening needs CAP_NET_ADMIN in the initial user
// and PID namespaces; elsewhere only gpureap's own children and the orphans it reaps are
// seen (their wait statuses).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "proc/proc_io.hpp"

namespace gpureap::holders {

struct ProcessExit {
  pid_t pid = 0;        // the process (thread-group leader); threads are left out
  int wait_status = 0;  // as waitpid(2) reports it
};

struct ProcessFork {
  pid_t child = 0;      // a new process: a PID we knew has been reused
  pid_t parent = 0;     // the process (thread group) that forked it
};

// What one drain read, in the order the kernel sent it.
struct ProcessEventBatch {
  std::vector<ProcessExit> exits;
  std::vector<ProcessFork> forks;
  std::vector<pid_t> execs;  // processes that ran exec: their close-on-exec descriptors are gone
  std::vector<pid_t> credentials;  // processes whose user or group ids changed (setuid, setgid)
  bool lost = false;         // the kernel dropped some (ENOBUFS: the buffer overflowed on a busy host)
};

class ProcessEvents {
 public:
  // nullopt with the reason when the connector cannot be used here.
  static std::optional<ProcessEvents> open(std::string* why);

  int fd() const { return fd_.get(); }
  // Appends every event queued (non-blocking) to `batch`.
  void drain(ProcessEventBatch& batch);

 private:
  ProcessEvents() = default;
  // Appends the events of one datagram of n bytes.
  static void read_datagram(const char* buffer, std::size_t n, ProcessEventBatch& batch);

  procfs::unique_fd fd_;
  std::vector<char> buffers_;  // the datagrams of one receive
};

}  // namespace gpureap::holders
