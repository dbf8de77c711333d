#include "proc/wake_signal.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace gpureap {

WakeSignal::WakeSignal() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!fd_) throw std::system_error(errno, std::generic_category(), "eventfd");
}

void WakeSignal::notify() const {
  const std::uint64_t one = 1;
  // Only EAGAIN can fail here (the counter is full): the reader is woken anyway.
  [[maybe_unused]] const ssize_t n = ::write(fd_.get(), &one, sizeof one);
}

void WakeSignal::drain() const {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t n = ::read(fd_.get(), &count, sizeof count);
}

}  // namespace gpureap
