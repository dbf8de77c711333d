// A descriptor that becomes readable when another thread has something for a loop (top's screen,
// watch's daemon), which polls it beside its other descriptors: no thread waits on a sleep.
#pragma once

#include "proc/proc_io.hpp"

namespace gpureap {

class WakeSignal {
 public:
  WakeSignal();  // an eventfd; throws std::system_error when none can be had
  void notify() const;
  void drain() const;  // readable no more until the next notify()
  int fd() const { return fd_.get(); }

 private:
  procfs::unique_fd fd_;
};

}  // namespace gpureap
