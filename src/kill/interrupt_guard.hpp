// While the ladder may hold processes stopped or frozen, SIGINT, SIGTERM, SIGHUP and SIGQUIT
// must not end gpureap: Ctrl-C, a closed terminal or a service manager's stop would leave a
// job in state T for ever. A command's main thread installs the guard around its kill (a
// handler that only records the signal on a self-pipe) and hands the ladder its
// interruption(); the ladder looks at it between steps and while it waits, and on
// interruption continues everything it stopped before it reports. A thread that runs a ladder
// for an owner with signal handlers of its own (top's action worker) takes an InterruptRequest
// instead: the owner calls request() and the ladder stops the same way.
#pragma once

#include <array>
#include <csignal>

#include <atomic>

#include "kill/escalation.hpp"
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

  // For EscalationOptions::interruption; valid while the guard lives.
  Interruption interruption() { return Interruption{[this] { return received(); }, fd()}; }

  static constexpr std::array<int, 4> kSignals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};

 private:
  procfs::unique_fd read_end_;
  procfs::unique_fd write_end_;
  std::array<struct sigaction, kSignals.size()> previous_{};
};

// An interruption one thread asks of a ladder another thread runs. Thread-safe; the first
// request wins and stays (a later ladder stops at once too).
class InterruptRequest {
 public:
  InterruptRequest();
  InterruptRequest(const InterruptRequest&) = delete;
  InterruptRequest& operator=(const InterruptRequest&) = delete;

  void request(int signal);  // the signal the owner received (any nonzero reason)
  int received() const { return signal_.load(); }
  // For EscalationOptions::interruption; valid while the request lives.
  Interruption interruption() const { return Interruption{[this] { return received(); }, read_end_.get()}; }

 private:
  std::atomic<int> signal_{0};
  procfs::unique_fd read_end_;
  procfs::unique_fd write_end_;
};

}  // namespace gpureap
