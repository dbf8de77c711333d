// While the ladder may hold processes stopped or frozen, SIGINT, SIGTERM, SIGHUP and SIGQUIT
// must not end gpureap: Ctrl-C, a closed terminal or a service manager's stop would leave a
// job in state T for ever. The guard catches them (a handler that only records the signal on
// a self-pipe, for every thread of the process), the ladder looks at it between steps and
// while it waits, and on interruption continues everything it stopped before it reports.
#pragma once

#include <array>
#include <csignal>

#include "proc/proc_io.hpp"

namespace gpureap {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers
  ~InterruptGuard();  // restores the previous dispositions
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // The first interrupting signal received so far (0: none). Never blocks.
  int received();
  // Readable when a signal arrived: for poll() while the ladder waits.
  int fd() const { return read_end_.get(); }

  static constexpr std::array<int, 4> kSignals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};

 private:
  procfs::unique_fd read_end_;
  procfs::unique_fd write_end_;
  std::array<struct sigaction, kSignals.size()> previous_{};
};

}  // namespace gpureap
