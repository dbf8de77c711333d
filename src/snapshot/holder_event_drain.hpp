// Reads the kernel's holder events on a thread of its own as they come, between the scans that
// use the set (snapshot/holder_events.hpp): the connector reports every fork and exit on the
// host, and between two of export's scrapes a busy host fills its buffer, the kernel drops
// events, and the next scrape walks /proc. At most one read per kDrainGap; each read takes what
// is queued, and the set holds only live holders, so neither work nor memory grows unbounded.
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include "proc/proc_io.hpp"
#include "snapshot/holder_events.hpp"

namespace gpureap {

class HolderEventDrain {
 public:
  // Does nothing without `events`, or once they turn out not to be had (the fallback).
  explicit HolderEventDrain(std::shared_ptr<HolderEvents> events);
  ~HolderEventDrain();  // stops the thread and waits for it
  HolderEventDrain(const HolderEventDrain&) = delete;
  HolderEventDrain& operator=(const HolderEventDrain&) = delete;

 private:
  void run();
  // Waits up to `timeout` (negative: without end) for the stop or one of `fds`; false on the stop.
  bool wait(const std::vector<int>& fds, std::chrono::milliseconds timeout);

  std::shared_ptr<HolderEvents> events_;
  procfs::unique_fd stop_read_;
  procfs::unique_fd stop_write_;
  std::thread thread_;
};

}  // namespace gpureap
